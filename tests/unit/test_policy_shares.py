"""Each held slot's share of the link (``policy.slot_shares``, issue #28)."""

from __future__ import annotations

import pytest

from arkvory_sched.policy import (
    LIMITED_FLOOR_SHARE,
    SHARE_PACE_AGE_SECONDS,
    queue_schedule,
    slot_shares,
)

RATE = 40.0  # bytes per second: the arithmetic is the same at any scale
OLD = SHARE_PACE_AGE_SECONDS + 1.0


def test_without_a_limited_session_every_slot_has_an_equal_share() -> None:
    shares = slot_shares([(10.0, OLD), (10.0, OLD), None], RATE, 4)
    assert shares.held == [RATE / 3] * 3  # the active sessions share the link
    assert shares.per_slot == RATE / 4  # a later session: a slot's share
    assert shares.limited == [False, False, False]
    assert shares.limited_share == 0.0


def test_a_limited_session_keeps_its_pace_and_the_others_share_the_rest() -> None:
    shares = slot_shares([(1.0, OLD), (13.0, OLD), (13.0, OLD), (13.0, OLD)], RATE, 4)
    assert shares.limited == [True, False, False, False]
    assert shares.held == [1.0, 13.0, 13.0, 13.0]
    assert shares.per_slot == pytest.approx(13.0)  # 39 over the three other slots
    # A quarter of the slots, each held 13 times as long: 1 start in 40 is limited.
    assert shares.limited_share == pytest.approx(0.25 / (13 * 0.75 + 0.25))


@pytest.mark.parametrize(
    "pace",
    [
        (1.0, SHARE_PACE_AGE_SECONDS - 0.1),  # too young to say
        (0.0, OLD),  # sent nothing yet: its bytes may not be reported
        None,  # not sending now (between two ranges)
    ],
)
def test_a_session_that_has_not_shown_a_pace_is_not_limited(
    pace: tuple[float, float] | None,
) -> None:
    shares = slot_shares([pace, (20.0, OLD)], RATE, 2)
    assert shares.limited == [False, False]
    assert shares.held == [RATE / 2, RATE / 2]


def test_against_a_guessed_rate_nobody_is_limited() -> None:
    shares = slot_shares([(1.0, OLD), (19.0, OLD)], RATE, 2, known=False)
    assert shares.limited == [False, False]


def test_a_stalled_session_is_expected_at_the_floor_share() -> None:
    shares = slot_shares([(0.001, OLD), (20.0, OLD)], RATE, 2)
    floor = LIMITED_FLOOR_SHARE * RATE / 2
    assert shares.held[0] == floor
    assert shares.held[1] == pytest.approx(RATE - floor)


def test_with_every_slot_limited_waiters_are_charged_their_full_size() -> None:
    shares = slot_shares([(1.0, OLD), (1.0, OLD)], RATE, 4)
    assert shares.limited == [True, True]
    assert shares.limited_share == 0.0
    assert shares.per_slot == pytest.approx((RATE - 2.0) / 2)


def test_the_schedule_runs_on_the_slots_of_the_sessions_not_limited() -> None:
    shares = slot_shares([(1.0, OLD), (13.0, OLD), (13.0, OLD), (13.0, OLD)], RATE, 4)
    table = shares.tables([100, 26, 52, 13], 0.0, 4)[1]
    assert table == [1.0, 2.0, 4.0]  # the limited session's slot is left out
    plain = slot_shares([(10.0, OLD)] * 2, RATE, 4)
    assert plain.tables([40, 80], 0.0, 4)[1] == [0.0, 0.0, 2.0, 4.0]


def test_the_schedule_charges_waiters_less_the_limited_share() -> None:
    starts = queue_schedule([0.0], [10.0, 10.0, 10.0], 1.0, limited_share=0.5)
    assert starts == [0.0, 5.0, 10.0]
