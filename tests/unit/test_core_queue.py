"""Queue order and slot policy in the core: strategies (R-STRAT), classes, weights,
round-robin, aging, reserve and share (R-CLASS), preemption (R-PREEMPT)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from arkvory_sched import (
    Admitted,
    DownloadClass,
    DownloadRequest,
    Grant,
    InvalidRequestError,
    PrincipalKind,
    Queued,
    Rejected,
    Strategy,
)
from arkvory_sched.memory._core import PendingRequest, SchedulerCore
from arkvory_sched.memory._fairqueue import FairQueue
from arkvory_sched.memory._session import PrincipalRecord, Session, SessionState
from arkvory_sched.policy import PREEMPT_MIN_HOLD_SECONDS
from arkvory_sched.testing import FakeClock

from ._helpers import (
    CHUNK,
    GIB,
    MIB,
    SMALL,
    admitted,
    ask,
    assert_clean,
    deliver,
    keep_polling,
    key_of,
    make_core,
    position,
    queued,
    req,
    serve_order,
    span,
    start,
    wait_in_queue,
)

SIZE = 8 * CHUNK


def _join(core: SchedulerCore, clock: FakeClock, waiters: list[DownloadRequest]) -> None:
    for waiter in waiters:
        wait_in_queue(core, waiter)
        clock.advance(0.1)


def _queue_rank(core: SchedulerCore, request: DownloadRequest) -> int:
    session = core.table.sessions[key_of(request)]
    assert session.state is SessionState.WAITING
    return session.queue_rank


# --- R-STRAT-1: ordered --------------------------------------------------------------------


def test_fifo_within_a_class() -> None:
    core, clock = make_core(sessions=1)
    holder = start(core, req("holder", download_id=None))
    waiters = [req(f"user{i}") for i in range(5)]
    _join(core, clock, waiters)
    assert serve_order(core, clock, holder, waiters) == waiters
    assert_clean(core)


def test_one_principals_downloads_are_served_in_arrival_order() -> None:
    core, clock = make_core(sessions=1)
    holder = start(core, req("holder", download_id=None))
    waiters = [req("ci", f"artifact-{i}") for i in range(4)]
    _join(core, clock, waiters)
    assert serve_order(core, clock, holder, waiters) == waiters


def test_round_robin_between_principals_of_a_class() -> None:
    core, clock = make_core(sessions=1)
    holder = start(core, req("holder", download_id=None))
    fleet = [req("fleet", f"o{i}") for i in range(3)]
    laptop = [req("laptop", f"o{i}") for i in range(3)]
    _join(core, clock, fleet + laptop)  # the whole fleet arrived first
    order = serve_order(core, clock, holder, fleet + laptop)
    assert order == [fleet[0], laptop[0], fleet[1], laptop[1], fleet[2], laptop[2]]
    assert_clean(core)


def test_higher_class_is_served_first() -> None:
    core, clock = make_core(sessions=1)
    holder = start(core, req("holder", download_id=None, requested_class="background"))
    bulk = req("mirror", requested_class="bulk")
    release = req("ci")
    person = req("person", kind=PrincipalKind.PERSON)
    _join(core, clock, [bulk, release, person])
    assert serve_order(core, clock, holder, [bulk, release, person]) == [person, release, bulk]


def test_weights_share_slots_eight_four_two_one() -> None:
    core, clock = make_core(sessions=1)
    holder = start(core, req("holder", download_id=None))  # a release grant
    class_of: dict[DownloadRequest, DownloadClass] = {}
    for cls, count in zip(DownloadClass, (32, 16, 8, 4), strict=True):
        for i in range(count):
            kind = (
                PrincipalKind.PERSON if cls is DownloadClass.INTERACTIVE else PrincipalKind.SERVICE
            )
            lowered = cls.value if cls.rank > 1 else None
            waiter = req(f"{cls.value}-{i}", kind=kind, requested_class=lowered)
            class_of[waiter] = cls
            wait_in_queue(core, waiter)
    served = serve_order(core, clock, holder, list(class_of))
    grants = [DownloadClass.RELEASE] + [class_of[waiter] for waiter in served]
    expected = {
        DownloadClass.INTERACTIVE: 8,
        DownloadClass.RELEASE: 4,
        DownloadClass.BULK: 2,
        DownloadClass.BACKGROUND: 1,
    }
    for period in range(4):  # every 15 consecutive grants split 8:4:2:1
        assert Counter(grants[15 * period : 15 * (period + 1)]) == expected
    assert_clean(core)


def test_custom_weights_apply() -> None:
    core, clock = make_core(sessions=1, weights=(1, 1, 1, 1))
    holder = start(core, req("holder", download_id=None, kind=PrincipalKind.PERSON))
    people = [req(f"person{i}", kind=PrincipalKind.PERSON) for i in range(4)]
    mirrors = [req(f"mirror{i}", requested_class="background") for i in range(4)]
    _join(core, clock, people + mirrors)
    served = serve_order(core, clock, holder, people + mirrors)
    # Equal weights: the classes alternate instead of people going 8 to 1.
    assert [waiter in mirrors for waiter in served[:4]].count(True) == 2


def test_aging_lifts_bulk_to_release_but_never_to_interactive() -> None:
    core, clock = make_core(sessions=1, aging_minutes=10)
    start(core, req("holder", download_id=None, requested_class="background"))
    bulk = req("mirror", requested_class="bulk")
    release = req("ci")
    person = req("person", kind=PrincipalKind.PERSON)
    _join(core, clock, [bulk, release, person])
    clock.advance(0.5)
    core.tick()
    assert position(core, bulk) == 3
    keep_polling(core, clock, [bulk, release, person], 600)
    assert _queue_rank(core, bulk) == DownloadClass.RELEASE.rank
    assert position(core, bulk) == 2  # before the later release waiter, after the person
    keep_polling(core, clock, [bulk, release, person], 3600)
    assert _queue_rank(core, bulk) == DownloadClass.RELEASE.rank
    assert position(core, bulk) == 2
    assert_clean(core)


def test_aging_moves_one_class_per_period() -> None:
    core, clock = make_core(sessions=1, aging_minutes=10)
    start(core, req("holder", download_id=None))
    mirror = req("mirror", requested_class="background")
    wait_in_queue(core, mirror)
    keep_polling(core, clock, [mirror], 590)
    assert _queue_rank(core, mirror) == DownloadClass.BACKGROUND.rank
    keep_polling(core, clock, [mirror], 20)
    assert _queue_rank(core, mirror) == DownloadClass.BULK.rank
    keep_polling(core, clock, [mirror], 600)
    assert _queue_rank(core, mirror) == DownloadClass.RELEASE.rank
    # The class it reports is still its own: aging changes the lane, not the class.
    assert queued(ask(core, mirror)).download_class is DownloadClass.BACKGROUND


def test_aging_minutes_zero_disables_aging() -> None:
    core, clock = make_core(sessions=1, aging_minutes=0)
    start(core, req("holder", download_id=None, requested_class="background"))
    bulk = req("mirror", requested_class="bulk")
    release = req("ci")
    person = req("person", kind=PrincipalKind.PERSON)
    _join(core, clock, [bulk, release, person])
    keep_polling(core, clock, [bulk, release, person], 3600)
    assert _queue_rank(core, bulk) == DownloadClass.BULK.rank
    assert position(core, bulk) == 3


def test_fair_queue_aging_caps_at_release() -> None:
    queue = FairQueue(Strategy.ORDERED, (8, 4, 2, 1), aging_seconds=60)
    session = _session("mirror", DownloadClass.BACKGROUND, arrival=0.0)
    session.state = SessionState.WAITING
    queue.add(session)
    assert queue.promote_aged(59.9) == 0
    assert queue.promote_aged(60.0) == 1
    assert session.queue_rank == DownloadClass.BULK.rank
    assert queue.promote_aged(120.0) == 1
    assert session.queue_rank == DownloadClass.RELEASE.rank
    assert queue.promote_aged(10_000.0) == 0
    assert session.queue_rank == DownloadClass.RELEASE.rank
    assert len(queue) == 1


def _session(name: str, cls: DownloadClass, *, arrival: float, size: int = GIB) -> Session:
    return Session(
        key=name.encode(),
        principal=PrincipalRecord(name),
        object_size=size,
        base_class=cls,
        has_id=True,
        arrival=arrival,
        arrival_wall_ms=0,
        seq=int(arrival * 1000),
    )


# --- R-STRAT-2: smallest-first -------------------------------------------------------------


def test_smallest_first_serves_smaller_objects_first() -> None:
    core, clock = make_core(sessions=1, strategy="smallest-first", aging_minutes=10)
    holder = start(core, req("holder", download_id=None))
    sizes = [8 * GIB, 1 * GIB, 4 * GIB, 64 * MIB, 2 * GIB]
    waiters = [req(f"user{i}", size=size) for i, size in enumerate(sizes)]
    _join(core, clock, waiters)
    served = serve_order(core, clock, holder, waiters)
    assert [waiter.object_size for waiter in served] == sorted(sizes)
    assert_clean(core)


def test_smallest_first_keeps_classes() -> None:
    core, clock = make_core(sessions=1, strategy="smallest-first")
    holder = start(core, req("holder", download_id=None))
    small_bulk = req("mirror", size=64 * MIB, requested_class="bulk")
    big_person = req("person", size=16 * GIB, kind=PrincipalKind.PERSON)
    _join(core, clock, [small_bulk, big_person])
    assert serve_order(core, clock, holder, [small_bulk, big_person]) == [big_person, small_bulk]


def test_smallest_first_aging_stops_large_objects_waiting_forever() -> None:
    core, clock = make_core(sessions=1, strategy="smallest-first", aging_minutes=10)
    start(core, req("holder", download_id=None))
    large = req("large", size=16 * GIB)
    wait_in_queue(core, large)
    keep_polling(core, clock, [large], 300)
    soon_after = req("soon", size=32 * MIB)  # arrived within agingMinutes: goes first
    wait_in_queue(core, soon_after)
    keep_polling(core, clock, [large, soon_after], 400)
    much_later = req("later", size=32 * MIB)  # arrived after agingMinutes: goes after
    wait_in_queue(core, much_later)
    clock.advance(0.5)
    core.tick()
    assert position(core, soon_after) == 1
    assert position(core, large) == 2
    assert position(core, much_later) == 3


def test_smallest_first_without_aging_is_pure_size_order() -> None:
    core, clock = make_core(sessions=1, strategy="smallest-first", aging_minutes=0)
    start(core, req("holder", download_id=None))
    large = req("large", size=16 * GIB)
    wait_in_queue(core, large)
    keep_polling(core, clock, [large], 3600)
    small = req("small", size=32 * MIB)
    wait_in_queue(core, small)
    clock.advance(0.5)
    core.tick()
    assert position(core, small) == 1
    assert position(core, large) == 2


# --- R-STRAT-3 / R-STRAT-4: shared and run-time switches --------------------------------------


def test_shared_admits_every_request_per_request() -> None:
    core, _ = make_core(sessions=1, strategy="shared", max_downloads=3)
    grants = [admitted(core.admit(req(f"user{i}"))) for i in range(3)]
    assert all(grant.admission == "per-request" for grant in grants)
    assert core.session_count == 0  # session settings (1 slot) do not apply
    assert isinstance(core.admit(req("user3")), PendingRequest)
    stats = core.stats()
    assert stats.admission == "per-request"
    assert stats.strategy == "shared"


def test_switch_to_shared_makes_next_request_per_request() -> None:
    core, _ = make_core(sessions=1)
    start(core, req("alice"))
    assert core.stats().admission == "session"
    core.configure(core.settings.with_changes(strategy="shared"))
    decision = core.admit(req("bob"))
    assert isinstance(decision, Admitted)
    assert decision.admission == "per-request"
    assert core.stats().admission == "per-request"


def test_switch_to_shared_does_not_interrupt_active_sessions() -> None:
    core, _ = make_core(sessions=2, max_downloads=1)
    alice = req("alice", size=SIZE)
    first = admitted(ask(core, alice, span(0, CHUNK)))
    core.configure(core.settings.with_changes(strategy="shared"))
    admitted(core.admit(req("bob", size=SMALL)))  # every per-request place is taken
    following = core.admit(req("alice", size=SIZE, byte_range=span(CHUNK, 2 * CHUNK)))
    assert isinstance(following, Admitted)
    assert following.admission == "session"
    assert following.grant.session_key == first.session_key
    deliver(core, first)
    deliver(core, admitted(following))
    deliver(core, admitted(ask(core, alice, span(2 * CHUNK, SIZE))))
    assert core.session_count == 0
    assert core.stats().completed_total == 1
    assert_clean(core)


def test_waiting_download_goes_per_request_after_switch_to_shared() -> None:
    core, _ = make_core(sessions=1)
    start(core, req("alice"))
    bob = req("bob")
    wait_in_queue(core, bob)
    core.configure(core.settings.with_changes(strategy="shared"))
    decision = core.admit(bob)
    assert isinstance(decision, Admitted)
    assert decision.admission == "per-request"


def test_raised_threshold_sends_waiting_download_per_request() -> None:
    core, _ = make_core(sessions=1)
    start(core, req("alice", size=SIZE))
    bob = req("bob", size=SIZE)
    wait_in_queue(core, bob)
    core.configure(core.settings.with_changes(session_min_bytes=2 * SIZE))
    decision = core.admit(bob)
    assert isinstance(decision, Admitted)
    assert decision.admission == "per-request"


def test_strategy_switch_reorders_waiters_without_losing_them() -> None:
    core, clock = make_core(sessions=1)
    holder = start(core, req("holder", download_id=None))
    large, small = req("large", size=16 * GIB), req("small", size=64 * MIB)
    _join(core, clock, [large, small])
    core.configure(core.settings.with_changes(strategy="smallest-first", aging_minutes=0))
    assert core.waiting_count == 2
    assert core.active_count == 1  # the active session keeps its slot
    assert serve_order(core, clock, holder, [large, small]) == [small, large]
    assert_clean(core)


# --- R-CLASS-2 / R-CLASS-4: the class a request runs in -------------------------------------


def test_people_default_to_interactive_services_and_links_to_release() -> None:
    core, _ = make_core(sessions=4)
    person = admitted(ask(core, req("p", kind=PrincipalKind.PERSON)))
    service = admitted(ask(core, req("s", kind=PrincipalKind.SERVICE)))
    link = admitted(ask(core, req("l", kind=PrincipalKind.LINK)))
    operator_set = admitted(ask(core, req("m", base_class=DownloadClass.BULK)))
    assert person.download_class is DownloadClass.INTERACTIVE
    assert service.download_class is DownloadClass.RELEASE
    assert link.download_class is DownloadClass.RELEASE
    assert operator_set.download_class is DownloadClass.BULK


def test_class_can_only_be_lowered() -> None:
    core, _ = make_core(sessions=1)
    raised = admitted(ask(core, req("ci", requested_class="interactive")))
    assert raised.download_class is DownloadClass.RELEASE
    lowered = queued(ask(core, req("cron", requested_class="Background ")))
    assert lowered.download_class is DownloadClass.BACKGROUND
    person = queued(ask(core, req("p", kind=PrincipalKind.PERSON, requested_class="bulk")))
    assert person.download_class is DownloadClass.BULK


def test_unknown_class_is_invalid_request() -> None:
    core, _ = make_core()
    try:
        core.admit(req(requested_class="urgent"))
    except InvalidRequestError as error:
        assert error.field == "download_class"
    else:
        raise AssertionError("an unknown class must be refused")
    assert core.session_count == 0
    try:
        core.admit(req(size=SMALL, requested_class="urgent"))
    except InvalidRequestError as error:
        assert error.field == "download_class"
    else:
        raise AssertionError("an unknown class must be refused for small objects too")
    assert core.stats().request_active == 0


# --- R-CLASS-3: the interactive reserve ------------------------------------------------------


def test_interactive_reserve_holds_one_slot_from_four_sessions() -> None:
    core, clock = make_core(sessions=4, reserve=None)
    assert core.settings.reserve == 1
    for i in range(3):
        start(core, req(f"updater{i}"))
    updater = req("updater3")
    wait_in_queue(core, updater)  # a slot is free, but it is the reserve
    person = req("person", kind=PrincipalKind.PERSON)
    wait_in_queue(core, person)
    clock.advance(0.5)
    assert core.tick().marked == 1
    queued(ask(core, updater))
    grant = admitted(ask(core, person))
    assert grant.download_class is DownloadClass.INTERACTIVE
    assert core.active_count == 4
    assert_clean(core)


def test_no_reserve_below_four_slots() -> None:
    for sessions in (2, 3):
        core, _ = make_core(sessions=sessions, reserve=None)
        assert core.settings.reserve == 0
        for i in range(sessions):
            start(core, req(f"updater{i}"))
        assert core.active_count == sessions


def test_interactive_may_use_every_slot() -> None:
    core, _ = make_core(sessions=4, reserve=1)
    for i in range(4):
        start(core, req(f"person{i}", kind=PrincipalKind.PERSON))
    assert core.active_count == 4


# --- R-CLASS-5: per-principal share ----------------------------------------------------------


def test_per_principal_share_yields_to_contender_but_overflows_without() -> None:
    core, clock = make_core(sessions=2, per_principal=1)
    first = start(core, req("fleet", "o1"))
    second = start(core, req("fleet", "o2"))  # nobody else wants a slot: beyond the share
    assert core.principal_active("fleet") == 2
    third = req("fleet", "o3")
    wait_in_queue(core, third)
    clock.advance(1)
    laptop = req("laptop")
    wait_in_queue(core, laptop)
    deliver(core, first)
    clock.advance(0.5)
    core.tick()
    queued(ask(core, third))  # older, but over its share while laptop waits
    laptop_grant = admitted(ask(core, laptop))
    deliver(core, second)
    deliver(core, laptop_grant)
    clock.advance(0.5)
    core.tick()
    admitted(ask(core, third))  # no contender left: the slot is given again
    assert core.contenders_waiting() == 0
    assert_clean(core)


def test_principal_below_its_share_is_not_held_back_by_contenders() -> None:
    core, clock = make_core(sessions=3, per_principal=2)
    start(core, req("fleet", "o1"))
    start(core, req("a"))
    leaving = start(core, req("b"))
    second = req("fleet", "o2")
    wait_in_queue(core, second)
    clock.advance(0.1)
    wait_in_queue(core, req("c"))  # a contender, but the fleet is within its share
    deliver(core, leaving)
    clock.advance(0.5)
    core.tick()
    admitted(ask(core, second))
    assert core.principal_active("fleet") == 2
    assert_clean(core)


# --- R-PREEMPT ----------------------------------------------------------------------------------


@dataclass
class _Contest:
    """Two bulk protocol downloads hold both slots, each with a range in flight (``old``
    for a second longer); a release download waits at the head."""

    core: SchedulerCore
    clock: FakeClock
    old: DownloadRequest
    old_range: Grant
    young_range: Grant
    head: DownloadRequest

    def old_asks_next_range(self) -> Admitted | Queued | Rejected:
        """The old holder's response ends and it asks for the next range."""
        deliver(self.core, self.old_range)
        decision = ask(self.core, self.old, span(2 * CHUNK, 3 * CHUNK))
        if isinstance(decision, Admitted):
            self.old_range = decision.grant
        return decision


def _contest(**overrides: Any) -> _Contest:
    settings: dict[str, Any] = {"sessions": 2, "preempt": True}
    settings.update(overrides)
    core, clock = make_core(**settings)
    old, young = req("mirror-a", requested_class="bulk"), req("mirror-b", requested_class="bulk")
    deliver(core, admitted(ask(core, old, span(0, CHUNK))))
    old_range = admitted(ask(core, old, span(CHUNK, 2 * CHUNK)))
    clock.advance(1)
    young_range = start(core, young)
    head = req("ci")
    wait_in_queue(core, head)
    return _Contest(core, clock, old, old_range, young_range, head)


def _poll_until(
    core: SchedulerCore, clock: FakeClock, waiters: list[DownloadRequest], seconds: float
) -> bool:
    """Tick every second for ``seconds``, waiters polling; True if any tick preempted."""
    preempted = False
    for _ in range(int(seconds)):
        clock.advance(1)
        preempted |= core.tick().preempted
        for waiter in waiters:
            queued(ask(core, waiter))
    return preempted


def _wait_for_preemption(contest: _Contest) -> None:
    assert _poll_until(contest.core, contest.clock, [contest.head], PREEMPT_MIN_HOLD_SECONDS + 1)
    assert contest.core.stats().preemptions_total == 1


def test_preemption_after_one_minute_hold_by_a_lower_class() -> None:
    contest = _contest()
    core, clock = contest.core, contest.clock
    assert not _poll_until(core, clock, [contest.head], PREEMPT_MIN_HOLD_SECONDS - 2)
    clock.advance(1.5)
    assert core.tick().preempted
    assert core.stats().preemptions_total == 1
    # The longest holder yields at its next range boundary …
    assert queued(contest.old_asks_next_range()).position is not None
    # … and the head takes the slot at once.
    assert admitted(ask(core, contest.head)).download_class is DownloadClass.RELEASE
    assert core.principal_active("mirror-b") == 1
    assert core.principal_active("mirror-a") == 0
    assert_clean(core)


def test_preemption_of_same_class_only_above_share() -> None:
    core, clock = make_core(sessions=2, per_principal=1, preempt=True)
    first, second = req("fleet", "o1"), req("fleet", "o2")
    first_range = start(core, first)  # no contenders: the fleet goes beyond its share
    clock.advance(1)
    start(core, second)
    laptop = req("laptop")
    wait_in_queue(core, laptop)
    _poll_until(core, clock, [laptop], PREEMPT_MIN_HOLD_SECONDS + 1)
    assert core.stats().preemptions_total == 1
    deliver(core, first_range)
    queued(ask(core, first, span(0, CHUNK)))  # the longest holder yields
    admitted(ask(core, second, span(0, CHUNK)))  # the other keeps its share
    admitted(ask(core, laptop))
    assert core.principal_active("fleet") == 1
    assert_clean(core)


def test_no_preemption_of_same_class_within_share() -> None:
    core, clock = make_core(sessions=2, per_principal=1, preempt=True)
    start(core, req("alice"))
    start(core, req("carol"))
    bob = req("bob")
    wait_in_queue(core, bob)
    assert not _poll_until(core, clock, [bob], 3 * PREEMPT_MIN_HOLD_SECONDS)
    assert core.stats().preemptions_total == 0


def test_interactive_session_not_preempted_for_release_head() -> None:
    core, clock = make_core(sessions=2, preempt=True)
    start(core, req("p1", kind=PrincipalKind.PERSON))
    start(core, req("p2", kind=PrincipalKind.PERSON))
    ci = req("ci")
    wait_in_queue(core, ci)
    assert not _poll_until(core, clock, [ci], 2 * PREEMPT_MIN_HOLD_SECONDS)


def test_preemption_picks_the_lowest_class() -> None:
    core, clock = make_core(sessions=2, preempt=True)
    bulk = req("mirror", requested_class="bulk")
    background = req("sync", requested_class="background")
    bulk_range = admitted(ask(core, bulk, span(0, CHUNK)))
    clock.advance(1)
    background_range = admitted(ask(core, background, span(0, CHUNK)))
    person = req("person", kind=PrincipalKind.PERSON)
    wait_in_queue(core, person)
    assert not _poll_until(core, clock, [person], PREEMPT_MIN_HOLD_SECONDS - 5)
    clock.advance(7)  # both have held their slots for over a minute
    assert core.tick().preempted
    deliver(core, bulk_range)
    deliver(core, background_range)
    admitted(ask(core, bulk, span(CHUNK, 2 * CHUNK)))  # the older holder, a higher class
    queued(ask(core, background, span(CHUNK, 2 * CHUNK)))
    admitted(ask(core, person))
    assert_clean(core)


def test_preemption_at_most_one_per_tick() -> None:
    core, clock = make_core(sessions=3, preempt=True)
    holders = [req(f"mirror{i}", requested_class="bulk") for i in range(3)]
    ranges: list[Grant] = []
    for holder in holders:
        ranges.append(admitted(ask(core, holder, span(0, CHUNK))))
        clock.advance(1)
    heads = [req("ci-1"), req("ci-2")]
    _join(core, clock, heads)
    assert not _poll_until(core, clock, heads, PREEMPT_MIN_HOLD_SECONDS - 10)
    clock.advance(7)
    assert core.tick().preempted
    for _ in range(5):
        assert not _poll_until(core, clock, heads, 1)  # the first yield is still pending
    assert core.stats().preemptions_total == 1
    # The victim (the longest holder) yields; the first head takes its slot.
    deliver(core, ranges[0])
    queued(ask(core, holders[0], span(CHUNK, 2 * CHUNK)))
    admitted(ask(core, heads[0]))
    clock.advance(0.5)
    assert core.tick().preempted  # now the next head may have one
    assert core.stats().preemptions_total == 2
    assert_clean(core)


def test_preemption_yielder_blocked_while_head_waits() -> None:
    contest = _contest()
    core, clock = contest.core, contest.clock
    _wait_for_preemption(contest)
    queued(contest.old_asks_next_range())  # yields
    assert core.active_count == 1
    clock.advance(0.5)
    core.tick()
    # The slot is free and the yielder asks first, yet it must not take it back.
    queued(ask(core, contest.old, span(2 * CHUNK, 3 * CHUNK)))
    queued(ask(core, contest.old, span(2 * CHUNK, 3 * CHUNK)))
    admitted(ask(core, contest.head))
    assert_clean(core)


def test_preemption_yielder_restarts_aging() -> None:
    contest = _contest(aging_minutes=1)
    core, clock = contest.core, contest.clock
    _wait_for_preemption(contest)
    queued(contest.old_asks_next_range())
    admitted(ask(core, contest.head))
    clock.advance(0.5)
    core.tick()
    # It arrived over a minute ago, but its minute of aging starts again at the yield.
    assert _queue_rank(core, contest.old) == DownloadClass.BULK.rank
    keep_polling(core, clock, [contest.old], 61)
    assert _queue_rank(core, contest.old) == DownloadClass.RELEASE.rank


def test_preemption_cancelled_when_head_gets_a_slot_another_way() -> None:
    contest = _contest()
    core, clock = contest.core, contest.clock
    _wait_for_preemption(contest)
    deliver(core, contest.young_range)  # the whole object: young completes
    assert core.active_count == 1
    clock.advance(0.5)
    core.tick()
    admitted(ask(core, contest.head))
    # The head no longer needs the yield: the old holder keeps its slot.
    admitted(contest.old_asks_next_range())
    assert core.principal_active("mirror-a") == 1
    assert_clean(core)


def test_tools_without_id_are_never_preempted() -> None:
    core, clock = make_core(sessions=2, preempt=True)
    start(core, req("mirror-a", download_id=None, requested_class="bulk"))
    start(core, req("mirror-b", download_id=None, requested_class="bulk"))
    person = req("person", kind=PrincipalKind.PERSON)
    wait_in_queue(core, person)
    assert not _poll_until(core, clock, [person], 10 * PREEMPT_MIN_HOLD_SECONDS)
    assert core.stats().preemptions_total == 0


def test_preemption_disabled_by_settings() -> None:
    contest = _contest(preempt=False)
    assert not _poll_until(
        contest.core, contest.clock, [contest.head], 5 * PREEMPT_MIN_HOLD_SECONDS
    )
    admitted(contest.old_asks_next_range())
    assert contest.core.stats().preemptions_total == 0


def test_disabling_preemption_cancels_a_pending_yield() -> None:
    contest = _contest()
    _wait_for_preemption(contest)
    core = contest.core
    core.configure(core.settings.with_changes(preempt=False))
    admitted(contest.old_asks_next_range())
    assert core.active_count == 2


def test_no_preemption_after_switch_to_shared() -> None:
    contest = _contest()
    core, clock = contest.core, contest.clock
    assert not _poll_until(core, clock, [contest.head], PREEMPT_MIN_HOLD_SECONDS - 10)
    core.configure(core.settings.with_changes(strategy="shared"))
    # The head's session still waits (its client now gets per-request answers) while
    # the holders pass one minute: nothing may interrupt them any more.
    for _ in range(20):
        clock.advance(1)
        assert not core.tick().preempted
    admitted(contest.old_asks_next_range())
    assert core.stats().preemptions_total == 0


def test_switch_to_shared_cancels_a_pending_yield() -> None:
    contest = _contest()
    _wait_for_preemption(contest)
    core = contest.core
    core.configure(core.settings.with_changes(strategy="shared"))
    answer = contest.old_asks_next_range()
    assert isinstance(answer, Admitted)
    assert answer.admission == "session"
