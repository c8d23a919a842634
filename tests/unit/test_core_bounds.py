"""Bounds, rejection and release paths (R-RES-1..5): nothing grows without a limit, and
every way a download ends brings the counters back to zero."""

from __future__ import annotations

import pytest

from arkvory_sched import (
    Admitted,
    Delivered,
    Failed,
    Interrupted,
    InvalidRequestError,
    PrincipalKind,
    RejectReason,
)
from arkvory_sched.memory._core import PendingRequest, SchedulerCore
from arkvory_sched.policy import PREEMPT_MIN_HOLD_SECONDS

from ._helpers import (
    CHUNK,
    SMALL,
    admitted,
    ask,
    deliver,
    download_all,
    fail,
    interrupt,
    keep_polling,
    make_core,
    queued,
    rejected,
    req,
    span,
    start,
    wait_in_queue,
)

SIZE = 8 * CHUNK
PAUSE_RETENTION = 600.0


def _assert_empty(core: SchedulerCore) -> None:
    assert core.debug_invariants() == []
    assert core.active_count == 0
    assert core.waiting_count == 0
    assert core.session_count == 0
    assert core.grants_in_flight() == 0
    assert core.contenders_waiting() == 0
    assert core.active_noninteractive() == 0
    stats = core.stats()
    assert (stats.active, stats.waiting, stats.paused) == (0, 0, 0)
    assert (stats.request_active, stats.request_waiting) == (0, 0)
    assert stats.queue_empty_in_seconds is None


# --- R-RES-1: bounds ---------------------------------------------------------------------------


def test_queue_full_rejects_with_retry_after_not_growth() -> None:
    core, _ = make_core(sessions=1, queue_limit=3, queue_per_principal=3)
    start(core, req("a"))
    wait_in_queue(core, req("b"))
    wait_in_queue(core, req("c"))
    for i in range(100):
        refused = rejected(ask(core, req(f"late{i}")))
        assert refused.reason is RejectReason.QUEUE_FULL
        assert 2 <= refused.retry_after <= 300
    assert core.session_count == 3
    assert core.waiting_count == 2
    assert core.stats().rejections_total == {RejectReason.QUEUE_FULL: 100}
    assert core.debug_invariants() == []


def test_full_queue_still_serves_sessions_it_holds() -> None:
    core, _ = make_core(sessions=1, queue_limit=2, queue_per_principal=2)
    alice, bob = req("alice", size=SIZE), req("bob")
    admitted(ask(core, alice, span(0, CHUNK)))
    wait_in_queue(core, bob)
    rejected(ask(core, req("carol")))
    admitted(ask(core, alice, span(CHUNK, 2 * CHUNK)))  # its next range
    assert queued(ask(core, bob)).position == 1  # its poll


def test_queue_limit_counts_paused_sessions() -> None:
    core, clock = make_core(sessions=2, queue_limit=2, queue_per_principal=2)
    deliver(core, admitted(ask(core, req("alice", size=SIZE), span(0, CHUNK))))
    start(core, req("bob"))
    clock.advance(31)
    core.tick()
    assert core.stats().paused == 1
    assert rejected(ask(core, req("carol"))).reason is RejectReason.QUEUE_FULL


def test_per_principal_session_limit_rejects() -> None:
    core, _ = make_core(sessions=1, queue_per_principal=2)
    start(core, req("fleet", "o1"))
    wait_in_queue(core, req("fleet", "o2"))
    refused = rejected(ask(core, req("fleet", "o3")))
    assert refused.reason is RejectReason.PRINCIPAL_LIMIT
    assert refused.retry_after >= 1
    wait_in_queue(core, req("laptop", "o3"))  # other principals are not affected
    assert core.session_count == 3
    assert core.stats().rejections_total == {RejectReason.PRINCIPAL_LIMIT: 1}


@pytest.mark.parametrize("download_id", ["", "x" * 129, "has space", "caf\u00e9", "a\nb"])
def test_malformed_download_id_is_invalid_request(download_id: str) -> None:
    core, _ = make_core()
    with pytest.raises(InvalidRequestError) as raised:
        core.admit(req(download_id=download_id))
    assert raised.value.field == "download_id"
    assert core.session_count == 0


def test_longest_download_id_is_accepted() -> None:
    core, _ = make_core()
    admitted(ask(core, req(download_id="A-z0.9_:~+/=" + "x" * 116)))


def test_implicit_key_has_a_fixed_size_whatever_the_address() -> None:
    core, _ = make_core(sessions=2)
    short = start(core, req(download_id=None, address="::1"))
    long = start(core, req(download_id=None, address="2001:db8::" + "f" * 10_000))
    assert len(short.session_key) == len(long.session_key) == 16
    assert short.session_key != long.session_key


# --- R-RES-3: every release path brings the counters back to zero -----------------------------


def test_counters_back_to_zero_after_delivered() -> None:
    core, _ = make_core()
    alice = req("alice", size=SIZE)
    for i in range(8):
        deliver(core, admitted(ask(core, alice, span(i * CHUNK, (i + 1) * CHUNK))))
    download_all(core, req("person", kind=PrincipalKind.PERSON))
    _assert_empty(core)
    assert core.stats().completed_total == 2


@pytest.mark.parametrize("ending", ["interrupted", "failed"])
def test_counters_back_to_zero_after_interrupted_or_failed(ending: str) -> None:
    core, clock = make_core(idle_seconds=30)
    grant = start(core, req(size=SIZE))
    if ending == "interrupted":
        interrupt(core, grant, sent=CHUNK)
    else:
        fail(core, grant)
    assert core.grants_in_flight() == 0
    assert core.active_count == 1  # the client may resume within idleSeconds …
    clock.advance(31)
    core.tick()
    assert core.active_count == 0  # … else the slot is released on idle …
    clock.advance(PAUSE_RETENTION)
    core.tick()
    _assert_empty(core)  # … and the kept arrival expires


def test_counters_back_to_zero_after_idle_on_tick() -> None:
    core, clock = make_core(sessions=2, idle_seconds=30)
    deliver(core, admitted(ask(core, req(size=SIZE), span(0, CHUNK))))
    deliver(core, admitted(ask(core, req("zip", size=SIZE), span(SIZE - CHUNK, SIZE))))
    clock.advance(31)
    core.tick()
    assert core.stats().idle_releases_total == 2
    assert core.active_count == 0
    assert core.stats().paused == 2
    clock.advance(PAUSE_RETENTION + 1)
    core.tick()
    _assert_empty(core)


def test_counters_back_to_zero_after_tail_only_hold() -> None:
    core, clock = make_core(idle_seconds=30)
    deliver(core, admitted(ask(core, req(size=SIZE), span(SIZE - CHUNK, SIZE))))
    clock.advance(5.1)
    core.tick()
    assert core.active_count == 0
    clock.advance(PAUSE_RETENTION)
    core.tick()
    _assert_empty(core)


def test_counters_back_to_zero_after_no_show() -> None:
    core, clock = make_core(sessions=1)
    holder = start(core, req("holder"))
    for i in range(5):
        wait_in_queue(
            core, req(f"w{i}", kind=PrincipalKind.PERSON if i % 2 else PrincipalKind.SERVICE)
        )
    deliver(core, holder)
    clock.advance(60)
    core.tick()
    assert core.stats().no_shows_total == 5
    _assert_empty(core)


def test_counters_back_to_zero_after_pause_expiry() -> None:
    core, clock = make_core(sessions=2, idle_seconds=30)
    for name in ("a", "b"):
        deliver(core, admitted(ask(core, req(name, size=SIZE), span(0, CHUNK))))
    clock.advance(31)
    core.tick()
    assert core.stats().paused == 2
    clock.advance(PAUSE_RETENTION - 1)
    core.tick()
    assert core.session_count == 2  # still kept …
    clock.advance(2)
    core.tick()
    _assert_empty(core)  # … until ten minutes have passed


def test_counters_back_to_zero_after_close() -> None:
    core, clock = make_core(sessions=1, idle_seconds=30)
    alice, bob = req("alice", size=SIZE), req("bob")
    first = admitted(ask(core, alice, span(0, CHUNK)))
    wait_in_queue(core, bob)
    small = admitted(core.admit(req("carol", size=SMALL)))
    core.close()
    assert core.closed
    # Waiting and new clients are turned away; the active download is finished.
    assert rejected(ask(core, bob)).reason is RejectReason.SHUTTING_DOWN
    refused = rejected(ask(core, req("dave")))
    assert refused.reason is RejectReason.SHUTTING_DOWN
    assert refused.retry_after >= 1
    assert rejected(core.admit(req("erin", size=SMALL))).reason is RejectReason.SHUTTING_DOWN
    deliver(core, first)
    deliver(core, admitted(ask(core, alice, span(CHUNK, SIZE))))
    core.report(small, Delivered(small.byte_range))
    clock.advance(60)
    core.tick()
    _assert_empty(core)
    assert core.stats().closed


def test_close_refuses_a_paused_download_and_lets_it_expire() -> None:
    core, clock = make_core(idle_seconds=30)
    alice = req(size=SIZE)
    deliver(core, admitted(ask(core, alice, span(0, CHUNK))))
    clock.advance(31)
    core.tick()
    core.close()
    assert rejected(ask(core, alice, span(CHUNK, SIZE))).reason is RejectReason.SHUTTING_DOWN
    clock.advance(PAUSE_RETENTION)
    core.tick()
    _assert_empty(core)


def test_close_wakes_per_request_waiters() -> None:
    core, _ = make_core(max_downloads=1)
    running = admitted(core.admit(req(size=SMALL)))
    waiters = [core.admit(req(f"w{i}", size=SMALL)) for i in range(3)]
    assert all(isinstance(waiter, PendingRequest) for waiter in waiters)
    woken = core.close()
    assert woken == [w.waiter_id for w in waiters if isinstance(w, PendingRequest)]
    assert core.stats().request_waiting == 0
    core.report(running, Delivered(running.byte_range))
    _assert_empty(core)


@pytest.mark.parametrize("ending", ["delivered", "interrupted", "failed"])
def test_per_request_places_back_to_zero(ending: str) -> None:
    core, _ = make_core(max_downloads=2)
    grants = [admitted(core.admit(req(f"u{i}", size=SMALL))) for i in range(2)]
    pending = core.admit(req("late", size=SMALL))
    assert isinstance(pending, PendingRequest)
    for grant in grants:
        if ending == "delivered":
            promoted = core.report(grant, Delivered(grant.byte_range))
        elif ending == "interrupted":
            promoted = core.report(grant, Interrupted())
        else:
            promoted = core.report(grant, Failed())
        if promoted:
            assert promoted == [pending.waiter_id]
            assert core.cancel_pending(pending) is None
            late = core.grant_per_request(pending.download_class, None)
            core.report(late.grant, Delivered(None))
    _assert_empty(core)


def test_counters_back_to_zero_after_yield() -> None:
    core, clock = make_core(sessions=1, preempt=True)
    mirror = req("mirror", size=SIZE, requested_class="bulk")
    first = admitted(ask(core, mirror, span(0, CHUNK)))
    person = req("person", kind=PrincipalKind.PERSON)
    wait_in_queue(core, person)
    keep_polling(core, clock, [person], PREEMPT_MIN_HOLD_SECONDS + 1, every=1)
    deliver(core, first)
    answer = queued(ask(core, mirror, span(CHUNK, 2 * CHUNK)))  # yields, never comes back
    download_all(core, person)
    clock.advance(2 * (answer.check_at - clock.wall()) + 31)
    core.tick()
    _assert_empty(core)
    assert core.stats().preemptions_total == 1


def test_reporting_a_grant_twice_changes_nothing() -> None:
    core, _ = make_core()
    alice = req(size=SIZE)
    grant = admitted(ask(core, alice, span(0, CHUNK)))
    other = admitted(ask(core, alice, span(CHUNK, 2 * CHUNK)))
    deliver(core, grant)
    deliver(core, grant)
    fail(core, grant)
    assert core.grants_in_flight() == 1
    assert core.active_count == 1
    deliver(core, other)
    assert core.grants_in_flight() == 0
    assert core.debug_invariants() == []


def test_many_downloads_all_end_and_leave_nothing() -> None:
    core, clock = make_core(sessions=4, reserve=1, per_principal=2, preempt=True, aging_minutes=1)
    requests = [
        req(
            f"user{i % 7}",
            f"obj{i}",
            size=SIZE,
            kind=PrincipalKind.PERSON if i % 5 == 0 else PrincipalKind.SERVICE,
            requested_class="bulk" if i % 3 == 0 else None,
            download_id=None if i % 4 == 0 else f"d{i}",
            address=f"10.0.0.{i}",
        )
        for i in range(30)
    ]
    next_offset = dict.fromkeys(requests, 0)
    for _ in range(2000):
        if not next_offset:
            break
        clock.advance(0.5)
        core.tick()
        for request in list(next_offset):
            offset = next_offset[request]
            decision = ask(core, request, span(offset, offset + CHUNK))
            if isinstance(decision, Admitted):
                deliver(core, decision.grant)
                next_offset[request] = offset + CHUNK
                if offset + CHUNK >= SIZE:
                    del next_offset[request]
        assert core.debug_invariants() == []
    assert not next_offset
    assert core.stats().completed_total == 30
    _assert_empty(core)


# --- R-RES-2: one tick, no timers ------------------------------------------------------------


def test_tick_of_an_empty_scheduler_does_nothing() -> None:
    core, clock = make_core()
    clock.advance(3600)
    outcome = core.tick()
    assert (outcome.expired, outcome.idle_released, outcome.promoted, outcome.marked) == (
        0,
        0,
        0,
        0,
    )
    assert not outcome.preempted
    _assert_empty(core)
