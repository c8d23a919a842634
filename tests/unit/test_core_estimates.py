"""Start estimates and when to come back (R-EST-1..4)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from arkvory_sched import PrincipalKind, Queued
from arkvory_sched.memory._core import SchedulerCore
from arkvory_sched.policy import FALLBACK_RATE
from arkvory_sched.testing import FakeClock

from ._helpers import (
    CHUNK,
    GIB,
    MIB,
    admitted,
    ask,
    assert_clean,
    deliver,
    make_core,
    queued,
    req,
    span,
    start,
    wait_in_queue,
)

RATE = 100 * MIB  # the link rate configured where a test needs a known one


def _wait(answer: Queued, clock: FakeClock) -> float:
    return answer.starts_at - clock.wall()


def _delay(answer: Queued, clock: FakeClock) -> float:
    return answer.check_at - clock.wall()


def _head_behind(holder_size: int, **settings: Any) -> tuple[SchedulerCore, FakeClock, Queued]:
    """One slot held by a download of ``holder_size``; one waiter asks twice (no tick).
    The link rate is configured (:data:`RATE`) unless ``settings`` say otherwise."""
    settings.setdefault("bandwidth", RATE)
    core, clock = make_core(sessions=1, **settings)
    start(core, req("holder", size=holder_size, download_id=None))
    waiter = req("waiter")
    wait_in_queue(core, waiter)
    clock.advance(1)
    return core, clock, queued(ask(core, waiter))


# --- R-EST-3: checkAt ----------------------------------------------------------------------


def test_newcomer_first_answer_has_its_position_and_two_seconds() -> None:
    core, clock = make_core(sessions=1)
    start(core, req("holder", size=200 * GIB))
    wait_in_queue(core, req("earlier"))
    answer = wait_in_queue(core, req("newcomer"))
    assert answer.position == 2  # behind the one waiting already
    assert answer.retry_after == 2
    assert _delay(answer, clock) == pytest.approx(2.0)
    assert answer.reason == "download_queued"


def test_position_is_known_from_the_second_answer() -> None:
    core, clock = make_core(sessions=1)
    start(core, req("holder"))
    first, second = req("first"), req("second")
    wait_in_queue(core, first)
    wait_in_queue(core, second)
    clock.advance(0.5)
    core.tick()
    assert queued(ask(core, first)).position == 1
    assert queued(ask(core, second)).position == 2


def test_check_at_halfway_between_two_seconds_and_five_minutes() -> None:
    _, clock, answer = _head_behind(20 * GIB)
    wait = _wait(answer, clock)
    assert wait == pytest.approx(20 * GIB / RATE - 1, abs=1.5)
    assert 0.4 * wait <= _delay(answer, clock) <= 0.6 * wait
    assert 2 <= _delay(answer, clock) <= 300


def test_check_at_never_later_than_five_minutes() -> None:
    _, clock, answer = _head_behind(200 * GIB)
    assert _wait(answer, clock) > 1000
    # Capped, then spread by the per-ticket jitter so long waiters do not poll together.
    assert 0.8 * 300 <= _delay(answer, clock) <= 300
    assert answer.retry_after <= 300


def test_long_waiters_do_not_all_poll_at_the_cap() -> None:
    core, clock = make_core(sessions=1, bandwidth=RATE)
    start(core, req("holder", size=200 * GIB, download_id=None))
    waiters = [req("waiter", download_id=f"dl-{index}") for index in range(8)]
    for waiter in waiters:
        wait_in_queue(core, waiter)
    clock.advance(1)
    delays = {round(_delay(queued(ask(core, waiter)), clock)) for waiter in waiters}
    assert len(delays) > 1
    assert max(delays) <= 300


def test_check_at_not_sooner_than_two_seconds_behind_the_head() -> None:
    core, clock = make_core(sessions=1, bandwidth=RATE)
    start(core, req("holder", size=32 * MIB, download_id=None))
    first, second = req("first", size=32 * MIB), req("second", size=32 * MIB)
    wait_in_queue(core, first)
    wait_in_queue(core, second)
    answer = queued(ask(core, second))
    assert answer.position == 2
    assert _wait(answer, clock) < 2
    assert _delay(answer, clock) == pytest.approx(2.0)
    assert answer.retry_after == 2


def test_head_of_queue_checks_back_from_one_second() -> None:
    _, clock, answer = _head_behind(32 * MIB)
    assert answer.position == 1
    assert _delay(answer, clock) == pytest.approx(1.0)
    assert answer.retry_after == 1


def test_marked_waiter_is_told_to_come_at_once() -> None:
    core, clock = make_core(sessions=1)
    holder = req("holder", size=16 * GIB)
    deliver(core, admitted(ask(core, holder, span(0, 16 * GIB - CHUNK))))
    admitted(ask(core, holder, span(16 * GIB - CHUNK, 16 * GIB)))  # finishing within 5 s
    waiter = req("waiter", size=200 * GIB)
    wait_in_queue(core, waiter)
    for i in range(3):
        wait_in_queue(core, req(f"behind-{i}", size=200 * GIB))
    clock.advance(0.5)
    assert core.tick().marked >= 1
    answer = queued(ask(core, waiter))
    assert answer.retry_after == 1


def test_a_marked_back_up_is_back_at_its_check_at_not_a_second_later() -> None:
    """Issue #28: its check delay is whole seconds, so ``Retry-After`` (whole seconds,
    rounded up) brings it back at its checkAt; it used to come up to a second later."""
    core, clock = make_core(sessions=1)
    holder = req("holder", size=16 * GIB)
    deliver(core, admitted(ask(core, holder, span(0, 16 * GIB - CHUNK))))
    admitted(ask(core, holder, span(16 * GIB - CHUNK, 16 * GIB)))  # finishing within 5 s
    head, back_up = req("head", size=200 * GIB), req("back-up", size=200 * GIB)
    wait_in_queue(core, head)
    wait_in_queue(core, back_up)
    clock.advance(0.5)
    assert core.tick().marked == 2  # twice the slots about to free: the head and a back-up
    answer = queued(ask(core, back_up))
    assert answer.position == 2
    assert _delay(answer, clock) == pytest.approx(answer.retry_after)
    assert answer.retry_after > 1  # behind a 200 GiB download: a whole second or more


def test_jitter_spreads_polls_per_ticket() -> None:
    ratios = set()
    for i in range(40):
        core, clock = make_core(sessions=1, bandwidth=RATE)
        start(core, req("holder", size=20 * GIB, download_id=None))
        waiter = req(f"client-{i}")
        wait_in_queue(core, waiter)
        answer = queued(ask(core, waiter))
        ratio = _delay(answer, clock) / (_wait(answer, clock) / 2)
        assert 0.8 <= ratio <= 1.2
        ratios.add(round(ratio, 3))
    assert len(ratios) >= 10  # the same wait, yet the polls do not come together


def test_retry_after_is_whole_seconds_up_to_check_at() -> None:
    _, clock, answer = _head_behind(20 * GIB)
    assert answer.retry_after == max(1, math.ceil(_delay(answer, clock) - 1e-9))


# --- R-EST-1: the measured rate ------------------------------------------------------------


def test_estimate_uses_peak_rate_not_mean() -> None:
    core, clock = make_core(sessions=1)
    first = start(core, req("first", size=2000 * MIB, download_id=None))
    core.tick()  # every slot held: the seconds are busy and their bytes read (ADR 0034)
    for _ in range(5):  # five busy seconds (the rate is the busiest five-second mean) …
        clock.advance(1)
        core.progress(first, 400 * MIB)
        core.tick()
    deliver(core, first)
    clock.advance(30)  # … then a quiet half minute
    start(core, req("holder", size=10 * GIB, download_id=None))
    waiter = req("waiter")
    wait_in_queue(core, waiter)
    answer = queued(ask(core, waiter))
    # The holder's 10 GiB at the peak 400 MiB/s; the mean of the last 35 s would say
    # seven times that.
    assert _wait(answer, clock) == pytest.approx(10 * GIB / (400 * MIB), abs=1.0)
    assert core.stats().delivery_rate == pytest.approx(400 * MIB)


def test_a_cold_server_reads_its_first_delivery_run_before_a_second_completes() -> None:
    """Nothing configured, a link faster than the guess: half a second of delivery
    already says so. Before, the first complete second came up to two seconds after the
    crowd did, and every answer until then came from the guess (issue #28)."""
    link = 4 * FALLBACK_RATE
    core, clock = make_core(sessions=1)
    clock.advance(0.3)  # delivery begins within a second, not on its edge
    grant = start(core, req("holder", size=20 * link, download_id=None))
    waiter = req("waiter")
    wait_in_queue(core, waiter)
    for _ in range(4):  # 0.8 s: no second has completed, and the table is not a second old
        clock.advance(0.2)
        core.progress(grant, int(0.2 * link))
    answer = queued(ask(core, waiter))
    # 20 s of link, 0.8 s sent; the guess would say 79.2 s.
    assert _wait(answer, clock) == pytest.approx(19.2, abs=0.5)
    assert core.stats().delivery_rate == 0.0  # still a guess, shown as no reading


def test_a_first_reading_with_a_handover_in_it_does_not_lower_the_rate() -> None:
    """The first busy reading is one second's; when the slots changed hands in it
    (0.3 s with nothing sent), it says 70 % of the link. The delivery run so far says
    90 %, and is a rate the link carried too (issue #28)."""
    link = 4 * FALLBACK_RATE
    core, clock = make_core(sessions=1)
    clock.advance(0.3)
    grant = start(core, req("holder", size=40 * link, download_id=None))
    waiter = req("waiter")
    wait_in_queue(core, waiter)
    for step in range(31):  # 0.3 s to 3.4 s in tenths, ticking every half second
        clock.advance(0.1)
        handover = 9 <= step < 12  # 1.2 s to 1.5 s
        core.progress(grant, 1 if handover else int(0.1 * link))
        if step % 5 == 4:
            core.tick()
    answer = queued(ask(core, waiter))
    truth = 40 - 2.8  # seconds of link still to send
    assert truth <= _wait(answer, clock) <= 1.15 * truth  # the one second would say 53 s


def test_a_slow_first_run_does_not_lower_the_guess() -> None:
    core, clock = make_core(sessions=1)
    grant = start(core, req("holder", size=10 * FALLBACK_RATE, download_id=None))
    waiter = req("waiter")
    wait_in_queue(core, waiter)
    for _ in range(5):
        clock.advance(0.25)
        core.progress(grant, 1024)  # a client that takes next to nothing
    answer = queued(ask(core, waiter))
    assert _wait(answer, clock) == pytest.approx(10.0, abs=0.5)  # the guess, not 1 KiB/s


def test_bandwidth_setting_is_a_floor_for_the_rate() -> None:
    core, clock = make_core(sessions=1, bandwidth=1 * GIB)
    grant = start(core, req("holder", size=10 * GIB, download_id=None))
    clock.advance(1)
    # Its first second read low, too soon to say its client limits it (policy.slot_shares).
    core.progress(grant, 400 * MIB)
    waiter = req("waiter")
    wait_in_queue(core, waiter)
    answer = queued(ask(core, waiter))
    assert _wait(answer, clock) == pytest.approx(10.0, abs=1.0)
    assert core.stats().delivery_rate == 1 * GIB


def test_rate_is_divided_among_running_downloads() -> None:
    core, clock = make_core(sessions=2)
    grant = start(core, req("a", size=10 * GIB, download_id=None))
    start(core, req("b", size=10 * GIB, download_id=None))
    core.tick()
    for _ in range(5):
        clock.advance(1)
        core.progress(grant, 400 * MIB)
        core.tick()
    clock.advance(1)
    waiter = req("waiter")
    wait_in_queue(core, waiter)
    answer = queued(ask(core, waiter))
    # a's rest after its 2000 MiB in flight (issue #28), at half the 400 MiB/s.
    left = 10 * GIB - 5 * 400 * MIB
    assert _wait(answer, clock) == pytest.approx(left / (200 * MIB), abs=1.0)


def test_estimate_counts_only_remaining_bytes_of_active_sessions() -> None:
    core, clock = make_core(sessions=1, bandwidth=1 * GIB)
    holder = req("holder", size=10 * GIB)
    first_half = admitted(ask(core, holder, span(0, 5 * GIB)))
    clock.advance(10)
    deliver(core, first_half)
    admitted(ask(core, holder, span(5 * GIB, 10 * GIB)))
    waiter = req("waiter")
    wait_in_queue(core, waiter)
    answer = queued(ask(core, waiter))
    assert _wait(answer, clock) == pytest.approx(5.0, abs=1.0)


# --- R-EST-2: a point and an interval --------------------------------------------------------


def test_later_positions_start_later() -> None:
    core, _ = make_core(sessions=1, bandwidth=RATE)
    start(core, req("holder", size=10 * GIB, download_id=None))
    waiters = [req(f"w{i}", size=10 * GIB) for i in range(4)]
    for waiter in waiters:
        wait_in_queue(core, waiter)
    answers = [queued(ask(core, waiter)) for waiter in waiters]
    assert [answer.position for answer in answers] == [1, 2, 3, 4]
    starts = [answer.starts_at for answer in answers]
    assert starts == sorted(starts)
    assert starts[3] - starts[0] == pytest.approx(3 * 10 * GIB / RATE, rel=0.05)


def test_interval_contains_the_point_estimate() -> None:
    _, clock, answer = _head_behind(20 * GIB)
    assert answer.starts_earliest <= answer.starts_at <= answer.starts_latest
    assert answer.starts_latest - answer.starts_earliest >= 4.0
    assert answer.starts_earliest >= clock.wall()
    assert answer.check_at <= answer.starts_at


def test_starts_at_is_wall_time() -> None:
    clock = FakeClock(monotonic=5.0, wall=1_900_000_000.0)
    core, _ = make_core(clock=clock, sessions=1)
    start(core, req("holder", size=20 * GIB, download_id=None))
    waiter = req("waiter")
    wait_in_queue(core, waiter)
    answer = queued(ask(core, waiter))
    assert 1_900_000_000.0 < answer.starts_at < 1_900_000_000.0 + 3600
    assert 1_900_000_000.0 < answer.check_at < answer.starts_at


def test_estimate_accounts_for_the_interactive_reserve() -> None:
    core, clock = make_core(sessions=4, reserve=1, bandwidth=RATE)
    for i in range(3):
        start(core, req(f"updater{i}", size=10 * GIB, download_id=None))
    updater = req("updater3")
    wait_in_queue(core, updater)
    clock.advance(0.5)
    core.tick()
    # The free slot is the reserve: an update starts only when another update ends
    # (three share the rate), so it must not be told "now" and poll every second.
    answer = queued(ask(core, updater))
    assert _wait(answer, clock) == pytest.approx(3 * 10 * GIB / RATE, abs=2.0)
    assert answer.retry_after > 2
    person = req("person", kind=PrincipalKind.PERSON)
    wait_in_queue(core, person)
    clock.advance(0.5)
    core.tick()
    admitted(ask(core, person))
    assert_clean(core)


def test_estimate_for_an_update_uses_a_free_unreserved_slot() -> None:
    core, clock = make_core(sessions=4, reserve=1, bandwidth=RATE)
    for i in range(3):
        start(core, req(f"p{i}", size=10 * GIB, download_id=None, kind=PrincipalKind.PERSON))
    start(core, req("updater0", size=10 * GIB, download_id=None))
    updater = req("updater1")
    wait_in_queue(core, updater)
    answer = queued(ask(core, updater))
    # Any of the four slots may go to it (three updates are allowed): the first to end.
    assert _wait(answer, clock) == pytest.approx(4 * 10 * GIB / RATE, abs=2.0)


def test_estimate_for_interactive_counts_every_slot() -> None:
    core, clock = make_core(sessions=4, reserve=1, bandwidth=RATE)
    for i in range(4):
        start(core, req(f"p{i}", size=10 * GIB, download_id=None, kind=PrincipalKind.PERSON))
    person = req("person", kind=PrincipalKind.PERSON)
    wait_in_queue(core, person)
    answer = queued(ask(core, person))
    assert _wait(answer, clock) == pytest.approx(4 * 10 * GIB / RATE, abs=2.0)


# --- R-EST-4: accuracy is measured -------------------------------------------------------------


def test_estimate_error_is_recorded_when_a_waiter_starts() -> None:
    core, clock = make_core(sessions=1, bandwidth=100 * MIB)  # an estimate, not a guess
    holder = start(core, req("holder", size=10 * GIB, download_id=None))
    waiter = req("waiter")
    wait_in_queue(core, waiter)
    estimate = queued(ask(core, waiter))
    assert core.estimate_error().count == 0
    clock.advance(20)
    deliver(core, holder)
    clock.advance(0.5)
    core.tick()
    admitted(ask(core, waiter))
    error = core.estimate_error()
    assert error.count == 1
    started_at = clock.wall()
    assert error.total == pytest.approx(abs(started_at - estimate.starts_at), abs=0.01)
