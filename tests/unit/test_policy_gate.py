"""Which classes may take a slot by their windows, and estimates moved into them
(R-WIN-2, R-EST-2): the pure rules of ``policy._gate``, on instants of wall time."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from arkvory_sched import DownloadClass, SchedulerSettings, policy
from arkvory_sched.policy import MIN_CHECK_SECONDS, MarkBudget

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")
EVERY_DAY = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]


def at(zone: ZoneInfo, text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=zone).timestamp()


def schedules(**classes: tuple[str, str, str, float]) -> SchedulerSettings:
    """Settings giving each named class one window every day: start, end, zone, share."""
    return SchedulerSettings(
        sessions=8,
        class_windows={
            name: {
                "windows": [{"weekdays": EVERY_DAY, "start": start, "end": end, "zone": zone}],
                "outsideShare": share,
            }
            for name, (start, end, zone, share) in classes.items()
        },
    )


NIGHT_BULK = schedules(bulk=("22:00", "06:00", "Europe/Berlin", 0.0))


def test_a_closed_class_gets_its_share_of_slots_and_an_opening() -> None:
    settings = schedules(bulk=("22:00", "06:00", "Europe/Berlin", 0.3))
    noon = at(BERLIN, "2026-06-05 12:00")
    gate = policy.class_gate(settings.class_windows, settings.sessions, noon)
    assert gate.caps == (None, None, 2, None)  # floor(0.3 × 8)
    assert gate.closed(DownloadClass.BULK.rank)
    assert not gate.closed(DownloadClass.RELEASE.rank)
    assert gate.openings[2] == at(BERLIN, "2026-06-05 22:00")
    assert gate.until == at(BERLIN, "2026-06-05 22:00")
    assert gate.windowed == (False, False, True, False)
    assert gate.may_start(2, 1) and not gate.may_start(2, 2)
    assert gate.room([0, 3, 5, 0]) == [None, None, 0, None]


def test_an_open_class_has_no_cap_until_its_closing() -> None:
    night = at(BERLIN, "2026-06-05 23:00")
    gate = policy.class_gate(NIGHT_BULK.class_windows, NIGHT_BULK.sessions, night)
    assert gate.caps == (None, None, None, None)
    assert gate.until == at(BERLIN, "2026-06-06 06:00")
    assert gate.may_start(2, 100)


def test_a_gate_is_kept_until_a_class_opens_or_closes_or_the_settings_change() -> None:
    windows, sessions = NIGHT_BULK.class_windows, NIGHT_BULK.sessions
    noon = at(BERLIN, "2026-06-05 12:00")
    gate = policy.class_gate(windows, sessions, noon)
    assert policy.current_gate(gate, windows, sessions, noon + 3600) is gate
    assert policy.current_gate(gate, windows, sessions, noon - 1) is not gate  # stepped back
    opened = policy.current_gate(gate, windows, sessions, at(BERLIN, "2026-06-05 22:00"))
    assert opened is not gate and not opened.closed(2)
    assert policy.current_gate(gate, windows, sessions + 1, noon) is not gate
    other = schedules(bulk=("21:00", "06:00", "Europe/Berlin", 0.0)).class_windows
    assert policy.current_gate(gate, other, sessions, noon) is not gate


@pytest.mark.parametrize(
    ("settings", "aging", "expected"),
    [
        # Bulk closed, nothing left: its rank holds only bulk waiters without aging…
        (NIGHT_BULK, False, [False, False, True, False]),
        # …but with aging, background waiters may have aged into it.
        (NIGHT_BULK, True, [False, False, False, False]),
        # Unless background has windows too (then it does not age) and is closed.
        (
            schedules(
                bulk=("22:00", "06:00", "Europe/Berlin", 0.0),
                background=("23:00", "05:00", "Europe/Berlin", 0.0),
            ),
            True,
            [False, False, True, True],
        ),
    ],
)
def test_a_rank_is_skipped_only_when_all_it_can_hold_is_closed(
    settings: SchedulerSettings, aging: bool, expected: list[bool]
) -> None:
    gate = policy.class_gate(settings.class_windows, 8, at(BERLIN, "2026-06-05 12:00"))
    assert policy.closed_ranks(gate, gate.room([0, 0, 0, 0]), aging) == expected


def test_a_rank_is_skipped_with_aging_when_nobody_below_can_have_aged_into_it() -> None:
    gate = policy.class_gate(NIGHT_BULK.class_windows, 8, at(BERLIN, "2026-06-05 12:00"))
    room = gate.room([0, 0, 0, 0])
    assert policy.closed_ranks(gate, room, True, [0, 3, 900, 0])[2] is True
    assert policy.closed_ranks(gate, room, True, [0, 3, 900, 1])[2] is False


def test_a_closed_class_with_room_left_is_not_skipped() -> None:
    settings = schedules(bulk=("22:00", "06:00", "Europe/Berlin", 0.25))
    gate = policy.class_gate(settings.class_windows, 8, at(BERLIN, "2026-06-05 12:00"))
    assert policy.closed_ranks(gate, gate.room([0, 0, 1, 0]), False)[2] is False
    assert policy.closed_ranks(gate, gate.room([0, 0, 2, 0]), False)[2] is True


def test_take_room_counts_down_and_refuses_at_zero() -> None:
    room: list[int | None] = [None, None, 2, 0]
    assert policy.take_room(room, 1) and room[1] is None
    assert policy.take_room(room, 2) and policy.take_room(room, 2)
    assert not policy.take_room(room, 2)
    assert not policy.take_room(room, 3)
    assert room == [None, None, 0, 0]


def test_windows_only_stop_their_own_class_from_aging() -> None:
    windows = NIGHT_BULK.class_windows
    assert not policy.class_ages(windows, DownloadClass.BULK.rank)
    assert policy.class_ages(windows, DownloadClass.BACKGROUND.rank)
    assert policy.class_ages((), DownloadClass.BULK.rank)


def test_a_closed_class_starts_after_its_opening_by_the_wait_it_would_have_now() -> None:
    [(_, schedule)] = NIGHT_BULK.class_windows
    now = at(BERLIN, "2026-06-05 18:00")
    start, not_before = policy.windowed_start(schedule.windows, 0.0, now + 600, now)
    assert start == at(BERLIN, "2026-06-05 22:10")
    assert not_before == at(BERLIN, "2026-06-05 22:00")


def test_a_start_after_the_closing_moves_to_the_next_opening() -> None:
    [(_, schedule)] = NIGHT_BULK.class_windows
    now = at(BERLIN, "2026-06-06 05:50")  # open, closing at 06:00
    start, not_before = policy.windowed_start(schedule.windows, 0.0, now + 1800, now)
    assert start == not_before == at(BERLIN, "2026-06-06 22:00")
    inside, floor = policy.windowed_start(schedule.windows, 0.0, now + 60, now)
    assert (inside, floor) == (now + 60, now)


def test_a_start_over_the_spring_forward_gap_opens_at_its_end() -> None:
    windows = policy.parse_windows(
        [{"weekdays": ["sun"], "start": "02:30", "end": "05:00", "zone": "America/New_York"}]
    )
    now = at(NEW_YORK, "2026-03-08 01:00")
    start, not_before = policy.windowed_start(windows, 0.0, now + 60, now)
    assert not_before == at(NEW_YORK, "2026-03-08 03:00")
    assert start == not_before + 60


def test_a_class_with_an_outside_share_keeps_the_queue_estimate() -> None:
    [(_, schedule)] = NIGHT_BULK.class_windows
    now = at(BERLIN, "2026-06-05 18:00")
    assert policy.windowed_start(schedule.windows, 0.1, now + 600, now) == (now + 600, now)
    assert policy.windowed_start((), 0.0, now + 600, now) == (now + 600, now)


def test_the_check_delay_ends_no_later_than_the_opening() -> None:
    assert policy.opening_check_delay(300.0, 14_400.0, 1.0) == 300.0  # hours away: 5 min
    assert policy.opening_check_delay(300.0, 110.0, 1.1) == pytest.approx(110.0)
    assert policy.opening_check_delay(300.0, 110.0, 0.9) == pytest.approx(90.0)  # spread
    assert policy.opening_check_delay(300.0, 0.5, 1.0) == MIN_CHECK_SECONDS
    assert policy.opening_check_delay(7.0, None, 1.0) == 7.0


def test_closed_classes_are_ahead_of_nobody_but_their_own() -> None:
    closed = [False, False, True, False]
    assert policy.open_lengths([1, 5, 900, 3], closed, 1) == [1, 5, 0, 3]
    assert policy.open_lengths([1, 5, 900, 3], closed, 2) == [1, 5, 900, 3]


def test_window_estimate_gathers_the_closed_ranks_and_the_opening() -> None:
    now = at(BERLIN, "2026-06-05 18:00")
    gate = policy.class_gate(NIGHT_BULK.class_windows, 8, now)
    [(_, schedule)] = NIGHT_BULK.class_windows
    estimate = policy.window_estimate(gate, schedule, 2, 2, [0, 4, 50, 0], [0, 8, 0, 0], wall=now)
    assert estimate.opening == at(BERLIN, "2026-06-05 22:00")
    assert estimate.check_delay(300.0, 1.0) == 300.0
    release = policy.window_estimate(gate, None, 1, 1, [0, 4, 50, 0], [0, 8, 0, 0], wall=now)
    assert list(release.lengths) == [0, 4, 0, 0]
    assert release.start(now + 5, now) == (now + 5, now)


def test_choose_marks_does_not_scan_a_closed_rank() -> None:
    heads = [[], ["r1", "r2"], [f"b{n}" for n in range(10_000)], []]
    budget = MarkBudget(free=1, total=2, noninteractive=2)
    seen: list[str] = []

    def may_take(waiter: str) -> bool:
        seen.append(waiter)
        return waiter.startswith("r")

    marks = policy.choose_marks(
        heads,
        [0.0, 0.0, 0.0, 0.0],
        [1 / 8, 1 / 4, 1 / 2, 1.0],
        budget,
        may_take,
        [False, False, True, False],
    )
    assert [waiter for waiter, _ in marks] == ["r1", "r2"]
    assert not any(waiter.startswith("b") for waiter in seen)
