"""The forecast of when the queue empties, and why a class is not draining (R-VIS-2).

Pure functions: ``now`` and every input come in, so each case states a queue and the
answer an operator should read off it.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from arkvory_sched.policy import (
    ClassSchedule,
    ClassWork,
    Stall,
    StallReason,
    forecast_empty,
    parse_windows,
    stall_reason,
)

MB = 1_000_000
# Monday 2026-06-01 12:00 UTC.
NOON = datetime(2026, 6, 1, 12, 0, tzinfo=UTC).timestamp()
HOUR = 3600.0


def nightly(outside_share: float = 0.0) -> ClassSchedule:
    """Open 22:00–06:00 UTC every day."""
    days = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
    window = {"weekdays": days, "start": "22:00", "end": "06:00", "zone": "UTC"}
    return ClassSchedule(parse_windows([window]), outside_share)


def work(*pairs: tuple[float, float]) -> list[ClassWork]:
    return [ClassWork(active_bytes=a, waiting_bytes=w) for a, w in pairs]


NO_WINDOWS = [None, None, None, None]


def test_an_empty_queue_is_empty_now() -> None:
    forecast = forecast_empty(work((0, 0), (0, 0), (0, 0), (0, 0)), NO_WINDOWS, rate=MB, now=NOON)
    assert forecast.empties_at == NOON
    assert forecast.class_empties_at == (NOON, NOON, NOON, NOON)


def test_without_windows_the_link_drains_everything_at_its_rate() -> None:
    forecast = forecast_empty(
        work((10 * MB, 0), (20 * MB, 30 * MB), (0, 40 * MB), (0, 0)), NO_WINDOWS, rate=MB, now=NOON
    )
    assert forecast.empties_at == pytest.approx(NOON + 100)
    interactive, release, bulk, background = forecast.class_empties_at
    # Active bytes first (30 s), then waiting bytes most urgent first.
    assert interactive == pytest.approx(NOON + 10)
    assert release == pytest.approx(NOON + 60)
    assert bulk == pytest.approx(NOON + 100)
    assert background == NOON


def test_without_a_measured_rate_nothing_can_be_forecast() -> None:
    forecast = forecast_empty(work((0, 0), (0, MB), (0, 0), (0, 0)), NO_WINDOWS, rate=0, now=NOON)
    assert forecast.empties_at is None
    assert forecast.class_empties_at == (NOON, None, NOON, NOON)


def test_a_closed_class_starts_at_its_next_opening() -> None:
    """Bulk opens at 22:00, ten hours from noon: its hour of work ends at 23:00, even
    though the link is idle until then."""
    schedules = [None, None, nightly(), None]
    forecast = forecast_empty(
        work((0, 0), (0, 0), (0, 3600 * MB), (0, 0)), schedules, rate=MB, now=NOON
    )
    assert forecast.empties_at == pytest.approx(NOON + 11 * HOUR)


def test_a_session_started_inside_its_window_runs_to_completion() -> None:
    """Active bytes of a closed class drain at once (R-WIN-2); only its waiters wait."""
    schedules = [None, None, nightly(), None]
    forecast = forecast_empty(
        work((0, 0), (0, 0), (60 * MB, 0), (0, 0)), schedules, rate=MB, now=NOON
    )
    assert forecast.empties_at == pytest.approx(NOON + 60)


def test_work_longer_than_a_window_continues_the_next_night() -> None:
    """Ten hours of bulk work in eight-hour nights: eight hours tonight (22:00–06:00),
    the remaining two from 22:00 the next day."""
    schedules = [None, None, nightly(), None]
    forecast = forecast_empty(
        work((0, 0), (0, 0), (0, 10 * 3600 * MB), (0, 0)), schedules, rate=MB, now=NOON
    )
    assert forecast.empties_at == pytest.approx(NOON + (10 + 24 + 2) * HOUR)


def test_an_outside_share_drains_a_closed_class_slowly() -> None:
    schedules = [None, None, nightly(outside_share=0.5), None]
    forecast = forecast_empty(
        work((0, 0), (0, 0), (0, 3600 * MB), (0, 0)), schedules, rate=MB, now=NOON
    )
    assert forecast.empties_at == pytest.approx(NOON + 2 * HOUR)


def test_other_classes_use_the_link_while_one_is_closed() -> None:
    schedules = [None, None, nightly(), None]
    forecast = forecast_empty(
        work((0, 0), (0, 3600 * MB), (0, 3600 * MB), (0, 0)), schedules, rate=MB, now=NOON
    )
    assert forecast.class_empties_at[1] == pytest.approx(NOON + HOUR)
    assert forecast.class_empties_at[2] == pytest.approx(NOON + 11 * HOUR)


def test_work_beyond_the_horizon_is_not_forecast() -> None:
    forecast = forecast_empty(
        work((0, 0), (0, 10 * MB), (0, 0), (0, 0)), NO_WINDOWS, rate=1.0, now=NOON, horizon=HOUR
    )
    assert forecast.empties_at is None


def stall(**changes: object) -> Stall | None:
    values: dict[str, object] = {
        "rank": 2,
        "waiting": 3,
        "active": 0,
        "active_total": 2,
        "active_interactive": 0,
        "sessions": 4,
        "reserve": 1,
        "schedule": None,
        "head_at_share": False,
        "now": NOON,
    }
    values.update(changes)
    return stall_reason(**values)  # type: ignore[arg-type]


def test_a_class_with_a_free_slot_drains() -> None:
    assert stall() is None


def test_a_class_without_waiters_is_never_stalled() -> None:
    assert stall(waiting=0, active_total=4) is None


def test_a_closed_window_names_the_next_opening() -> None:
    found = stall(schedule=nightly())
    assert found == Stall(
        StallReason.OUTSIDE_WINDOW, datetime(2026, 6, 1, 22, 0, tzinfo=UTC).timestamp()
    )


def test_inside_its_window_a_class_drains() -> None:
    night = datetime(2026, 6, 1, 23, 0, tzinfo=UTC).timestamp()
    assert stall(schedule=nightly(), now=night) is None


def test_a_closed_class_below_its_outside_share_still_drains() -> None:
    assert stall(schedule=nightly(outside_share=0.5), active=1) is None
    blocked = stall(schedule=nightly(outside_share=0.5), active=2)
    assert blocked is not None
    assert blocked.reason is StallReason.OUTSIDE_WINDOW


def test_every_slot_held() -> None:
    assert stall(active_total=4) == Stall(StallReason.NO_FREE_SLOT)


def test_only_the_interactive_reserve_is_free() -> None:
    assert stall(active_total=3) == Stall(StallReason.RESERVE)
    # ... which interactive itself may take.
    assert stall(rank=0, active_total=3) is None
    # A slot held by a person does not count against the reserve.
    assert stall(active_total=3, active_interactive=1) is None


def test_a_head_at_its_share() -> None:
    assert stall(head_at_share=True) == Stall(StallReason.AT_SHARE)
