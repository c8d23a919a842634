"""The policy's estimates: finish table, start, interval, check delay, Retry-After."""

from __future__ import annotations

import math
from functools import partial

import pytest

from arkvory_sched.policy import (
    FALLBACK_RATE,
    NEWCOMER_CHECK_SECONDS,
    UNKNOWN_RATE_CHECK_SECONDS,
    UNKNOWN_RATE_SPREAD,
    LinkRate,
    StartEstimate,
    WindowEstimate,
    answer_check_delay,
    bound_check_delay,
    busy_retry_after,
    check_delay,
    estimate_interval,
    estimate_rate,
    estimate_start,
    finish_table,
    jitter,
    no_show_at,
    queue_schedule,
    queued_retry_after,
    request_retry_after,
    taken_since,
)

MIB = 1024 * 1024


def start(table: list[float], ahead: int, **changes: object) -> float:
    values: dict[str, object] = {
        "ahead": ahead,
        "now": 100.0,
        "sessions": 4,
        "reserve": 0,
        "interactive": False,
        "active": 4,
        "active_interactive": 0,
        "waiting": 4,
        "waiting_bytes": 4 * 100.0 * MIB,
        "rate": 100.0 * MIB,
    }
    values.update(changes)
    return estimate_start(table, **values)  # type: ignore[arg-type]


def test_the_rate_is_measured_else_last_known_else_a_guess_and_never_below_bandwidth() -> None:
    assert estimate_rate(5.0, 7.0, None) == LinkRate(5.0, True)
    assert estimate_rate(0.0, 7.0, None) == LinkRate(7.0, True)
    assert estimate_rate(0.0, 0.0, None) == LinkRate(FALLBACK_RATE, False)
    assert estimate_rate(0.0, 0.0, None).measured == 0.0  # a guess is not shown as a rate
    # The configured rate is the prior: a reading below it is the clients' (issue #28) …
    assert estimate_rate(5.0, 0.0, 10) == LinkRate(10.0, True)
    # … and a cold server answers from it, not from the guess.
    assert estimate_rate(0.0, 0.0, 10) == LinkRate(10.0, True)
    assert estimate_rate(20.0, 0.0, 10) == LinkRate(20.0, True)


def test_a_guessed_rate_widens_the_interval_both_ways() -> None:
    known = estimate_interval(140.0, 100.0)
    guessed = estimate_interval(140.0, 100.0, known=False)
    assert known == pytest.approx((135.2, 144.8))
    assert guessed == pytest.approx(
        (100.0 + 40 / UNKNOWN_RATE_SPREAD, 100.0 + 40 * UNKNOWN_RATE_SPREAD)
    )


def test_the_check_delay_never_sends_the_next_round_past_its_earliest_start() -> None:
    bound = partial(bound_check_delay, now=100.0, earliest=130.0)
    assert bound(60.0, next_round=True, known=True) == 30.0
    assert bound(60.0, next_round=False, known=True) == 60.0  # later rounds keep their pace
    assert bound(20.0, next_round=True, known=True) == 20.0
    # At least a second, however close the start.
    assert bound_check_delay(5.0, now=100.0, earliest=100.2, next_round=True, known=True) == 1.0
    # On a guessed rate everyone asks again soon.
    assert bound(60.0, next_round=False, known=False) == UNKNOWN_RATE_CHECK_SECONDS


def test_while_the_count_climbs_the_waiters_who_could_take_its_next_slots_come_soon() -> None:
    """Issue #30: told their start on the count in force, the first waiters of a crowd
    came back 9 s later while the slots a step had opened for them stood empty."""

    def delay(ahead: int, rising: int) -> float:
        estimate = StartEstimate(ahead, 160.0, 130.0, 190.0, 0.0, WindowEstimate([ahead + 1]))
        return answer_check_delay(
            estimate,
            b"\x80",
            now=100.0,
            newcomer=False,
            marked=False,
            free_at_mark=0,
            sessions=4,
            rising=rising,
        )

    assert delay(1, 0) == 30.0  # the next round: its earliest start
    assert delay(6, 0) > 20.0  # a later round keeps its pace
    assert delay(1, 4) == delay(6, 4) == delay(7, 4) == NEWCOMER_CHECK_SECONDS
    assert delay(8, 4) == delay(8, 0)  # beyond what the next step may open


def test_the_finish_table_has_a_slot_free_now_for_every_free_slot() -> None:
    assert finish_table([300, 100], [10.0, 10.0], 50.0, 4) == [50.0, 50.0, 60.0, 80.0]


def test_the_first_round_starts_when_slots_finish_and_later_rounds_take_service_time() -> None:
    table = [110.0, 120.0, 130.0, 140.0]
    starts = [start(table, ahead) for ahead in range(6)]
    assert starts[:4] == table
    service = 100.0 * MIB * 4 / (100.0 * MIB)  # a mean download on a quarter of the link
    assert starts[4] == pytest.approx(110.0 + service)


def test_a_free_reserved_slot_is_not_promised_to_release_traffic() -> None:
    table = [150.0, 160.0, 170.0]  # one slot missing from the table: free now
    common = {"reserve": 1, "active": 3}
    assert start(table, 0, interactive=True, **common) == 100.0
    assert start(table, 0, **common) == 150.0


def test_a_missing_slot_counts_as_free_now() -> None:
    assert start([], 0, active=0) == 100.0
    assert start([150.0], 1, active=1) == 100.0
    assert start([150.0], 3, active=1) == 150.0


def test_the_interval_is_twelve_percent_of_the_wait_and_at_least_two_seconds() -> None:
    assert estimate_interval(200.0, 100.0) == pytest.approx((88.0 + 100.0, 212.0))
    assert estimate_interval(101.0, 100.0) == (100.0, 103.0)


def test_check_delay_rules() -> None:
    assert (
        check_delay(b"\x00", newcomer=True, ahead=50, wait=900, marked=False, free_at_mark=0) == 2
    )
    assert check_delay(b"\x80", newcomer=False, ahead=1, wait=900, marked=True, free_at_mark=2) == 1
    far = check_delay(b"\xff", newcomer=False, ahead=999, wait=10**6, marked=False, free_at_mark=0)
    assert 2 <= far <= 300
    near = check_delay(b"\xff", newcomer=False, ahead=3, wait=8, marked=False, free_at_mark=0)
    assert 2 <= near <= 4.4
    assert check_delay(b"\x00", newcomer=False, ahead=0, wait=0, marked=False, free_at_mark=0) == 1


def test_jitter_is_per_download_and_within_ten_percent() -> None:
    assert jitter(b"\x00") == 0.9
    assert jitter(b"\xff") < 1.1
    assert jitter(b"\x80abc") == jitter(b"\x80xyz")


def test_a_no_show_is_judged_thirty_seconds_or_one_delay_after_the_check() -> None:
    assert no_show_at(100.0, 2.0) == 130.0
    assert no_show_at(100.0, 200.0) == 300.0


def test_busy_retry_after_is_one_mean_download_on_the_link_within_bounds() -> None:
    assert busy_retry_after(10 * 100.0 * MIB, 10, 10.0 * MIB) == 10
    assert busy_retry_after(0.0, 0, 10.0) == 2
    assert busy_retry_after(1e15, 1, 1.0) == 300


def test_request_retry_after_is_the_time_to_drain_the_queue_ahead() -> None:
    assert request_retry_after(2.0, 7, 4) == 4
    assert request_retry_after(0.01, 0, 4) == 1
    assert request_retry_after(10.0, 100, 1) == 60


def test_a_waiter_s_own_entry_in_the_schedule_outranks_its_count_of_waiters_ahead() -> None:
    """Issue #28: the schedule was made at the last tick; two waiters started since, so
    the third has nobody ahead, yet its own entry says it starts with the next round."""
    schedule = [100.0, 100.0, 120.0]
    assert start([100.0] * 4, 0, schedule=schedule) == 100.0  # read by the count
    assert start([100.0] * 4, 0, schedule=schedule, own_start=120.0) == 120.0
    assert start([100.0] * 4, 0, schedule=schedule, own_start=90.0) == 100.0  # never before now


def test_a_round_of_followers_of_the_mean_size_follows_the_scheduled_waiters() -> None:
    """Two slots free at 1 and 10 s; one waiter of 2 s at a slot's share. The followers
    (its size on average) take the slot it frees again and again before the other."""
    assert queue_schedule([1.0, 10.0], [64.0], 32.0) == [1.0]
    assert queue_schedule([1.0, 10.0], [64.0], 32.0, followers=2) == [1.0, 3.0, 5.0]
    # Nobody scheduled: nobody follows (the finish table answers a newcomer).
    assert queue_schedule([1.0, 10.0], [], 32.0, followers=2) == []


def test_a_slot_the_table_holds_free_but_taken_since_ends_a_download_from_now() -> None:
    # A cold server: the tick's table had every slot free, and all four filled since.
    cold = start([], 0, active=4, waiting=1, waiting_bytes=100.0 * MIB)
    assert cold == pytest.approx(100.0 + 100.0 / (100.0 / 4))  # 4 s, not now
    # Only the slots taken since: two of four free in the table, three held now.
    table = [99.0, 99.0, 130.0, 140.0]  # made at 99
    assert taken_since(table, 99.0, 100.0, 4, 3, 10.0 * MIB, 40.0 * MIB) == [
        99.0,
        101.0,
        130.0,
        140.0,
    ]
    # A table as fresh as the slots is read as it is, and so is a session that came due
    # since the table was made: ending about now, or running late.
    fresh = [99.0, 99.5, 130.0, 140.0]
    assert taken_since(fresh, 99.0, 100.0, 4, 3, 10.0 * MIB, 40.0 * MIB) is fresh
    assert start([], 0, active=3, waiting=1) == 100.0


def test_a_marked_waiter_is_asked_back_in_whole_seconds_where_polls_are_free() -> None:
    """Issue #28: asked back in 1.x s, it was told ``Retry-After: 2`` and came back up to
    a second after its checkAt, when its slot had often freed and waited for it."""
    key, wait = b"\xff", 2.6  # halfway 1.3 s, spread up to 1.43 s
    kept = check_delay(key, newcomer=False, ahead=12, wait=wait, marked=True, free_at_mark=9)
    assert 1 < kept < 2  # PostgreSQL: each poll at the door costs the primary
    assert queued_retry_after(kept) == 2
    whole = check_delay(
        key, newcomer=False, ahead=12, wait=wait, marked=True, free_at_mark=9, polls_are_free=True
    )
    assert whole == 1.0 == queued_retry_after(whole)
    longer = check_delay(
        key, newcomer=False, ahead=40, wait=60, marked=True, free_at_mark=9, polls_are_free=True
    )
    assert longer == math.floor(longer) and 27 <= longer <= 33
    unmarked = check_delay(
        key, newcomer=False, ahead=12, wait=9, marked=False, free_at_mark=9, polls_are_free=True
    )
    assert unmarked != math.floor(unmarked)  # only marked waiters: the rest keep their spread
