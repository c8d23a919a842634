"""A stateful model of the scheduler core under random traffic, time and reconfiguration.

Hypothesis drives one :class:`SchedulerCore` on a :class:`FakeClock` with limits small
enough that every bound is reached: a handful of slots, a queue of twelve sessions, two
responses per session, two per-request places. Clients come from a small pool (people,
service accounts, a link; objects above and below the session threshold; with and
without a download id), read the object in every range shape the protocol knows, and
report each response as delivered, interrupted or failed — or simply stop coming.

After every step the structural invariants hold (``debug_invariants``), the counters
agree with each other and with what the clients hold, and every **new** activation
respected the slot limit, the interactive reserve and the per-principal share as they
stood before the step. Draining (everything reported, eleven idle minutes twice) always
returns every counter to zero (R-RES-3).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from arkvory_sched import (
    Admitted,
    ByteRange,
    Decision,
    Delivered,
    DeliveryOutcome,
    DownloadClass,
    DownloadRequest,
    Failed,
    Grant,
    Interrupted,
    InvalidRequestError,
    PrincipalKind,
    Queued,
    RangeKind,
    Rejected,
    RejectReason,
    SchedulerSettings,
    Strategy,
    TicketSigner,
)
from arkvory_sched._session_keys import session_key
from arkvory_sched.memory._core import PendingRequest, SchedulerCore
from arkvory_sched.testing import FakeClock

MIB = 1024 * 1024
CHUNK = 8 * MIB
TICKET_KEY = b"state-machine-ticket-key-0123456"

PRINCIPALS: tuple[tuple[str, PrincipalKind], ...] = (
    ("ann", PrincipalKind.PERSON),
    ("bob", PrincipalKind.PERSON),
    ("ci", PrincipalKind.SERVICE),
    ("fleet", PrincipalKind.SERVICE),
    ("link-7", PrincipalKind.LINK),
)
# One object below the 16 MiB session threshold, three above (3, 5 and 9 ranges).
OBJECTS: tuple[tuple[str, int], ...] = (
    ("notes.txt", 3 * MIB),
    ("tool.tar", 20 * MIB),
    ("image.qcow2", 40 * MIB),
    ("dump.sql", 72 * MIB),
)
DOWNLOAD_IDS: tuple[str | None, ...] = (None, "dl-a", "dl-b")
ADDRESSES = ("10.0.0.1", "10.0.0.2")
REQUESTED_CLASSES: tuple[str | None, ...] = (None, "bulk", "background", "interactive", "RELEASE")
RANGE_KINDS = ("full", "open", "bounded", "bounded", "suffix", "tail")


@dataclass(frozen=True, slots=True)
class Client:
    """One downloading program: who it is, what it reads, how it names its download."""

    principal: str
    kind: PrincipalKind
    object_id: str
    size: int
    download_id: str | None
    address: str
    requested_class: str | None

    @property
    def key(self) -> bytes:
        """Its session key (R-SESS-2): principal, object, and the id or else the address."""
        return session_key(self.principal, self.object_id, self.download_id, self.address)


@dataclass(slots=True)
class InFlight:
    """A granted response the server still has to report."""

    grant: Grant
    client: Client


@dataclass(slots=True)
class Waiter:
    """A per-request admission waiting for a place (the async shell would be sleeping)."""

    pending: PendingRequest
    client: Client
    byte_range: ByteRange | None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What the core looked like before a step: the base for judging new activations."""

    active_keys: frozenset[bytes]
    active: int
    active_noninteractive: int
    contenders: int
    principal_active: dict[str, int] = field(default_factory=dict)


clients = st.builds(
    lambda who, what, download_id, address, requested: Client(
        who[0], who[1], what[0], what[1], download_id, address, requested
    ),
    st.sampled_from(PRINCIPALS),
    st.sampled_from(OBJECTS),
    st.sampled_from(DOWNLOAD_IDS),
    st.sampled_from(ADDRESSES),
    st.sampled_from(REQUESTED_CLASSES),
)


def _byte_range(kind: str, size: int, chunk: int) -> ByteRange | None:
    chunks = -(-size // CHUNK)
    start = (chunk % chunks) * CHUNK
    if kind == "full":
        return None
    if kind == "open":
        return ByteRange(start, size, RangeKind.OPEN)
    if kind == "bounded":
        return ByteRange(start, min(size, start + CHUNK), RangeKind.BOUNDED)
    if kind == "suffix":
        return ByteRange(max(0, size - 64 * 1024), size, RangeKind.SUFFIX)
    # A bounded read of the last bytes only: the ZIP central directory (R-SESS-8).
    return ByteRange(size - 1024, size, RangeKind.BOUNDED)


def _active_keys(core: SchedulerCore) -> frozenset[bytes]:
    # Which session keys hold a slot right now: the session table's active map.
    return frozenset(core.table.active)


def _shares_ok(before: Snapshot, principal: str, per_principal: int) -> bool:
    return before.principal_active.get(principal, 0) < per_principal or before.contenders == 0


@settings(
    max_examples=300,
    stateful_step_count=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
class SchedulerMachine(RuleBasedStateMachine):
    """Random clients against one core; the model tracks only what clients can see."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.core = SchedulerCore(SchedulerSettings(), self.clock)
        self.known: list[Client] = []
        self.tickets: dict[bytes, str] = {}
        self.told: dict[bytes, Queued] = {}  # the last waiting answer per client
        self.next_offset: dict[bytes, int] = {}
        self.in_flight: list[InFlight] = []
        self.waiters: dict[int, Waiter] = {}
        self.promoted: set[int] = set()
        self.before = self._snapshot()
        self.granted_keys: set[bytes] = set()
        self.steps = 0

    # ------------------------------------------------------------------ set-up
    @initialize(
        sessions=st.integers(1, 5),
        strategy=st.sampled_from([Strategy.ORDERED, Strategy.ORDERED, Strategy.SMALLEST_FIRST]),
        aging_minutes=st.sampled_from([0.0, 1.0, 10.0]),
        preempt=st.booleans(),
    )
    def setup(self, sessions: int, strategy: Strategy, aging_minutes: float, preempt: bool) -> None:
        config = SchedulerSettings(
            strategy=strategy,
            sessions=sessions,
            aging_minutes=aging_minutes,
            preempt=preempt,
            ranges_per_session=2,
            queue_limit=12,
            queue_per_principal=6,
            max_downloads=2,
            transfer_queue_limit=4,
            transfer_queue_per_principal=2,
        )
        self.core = SchedulerCore(config, self.clock, TicketSigner([TICKET_KEY]))
        self.before = self._snapshot()

    # ------------------------------------------------------------------ helpers
    def _snapshot(self) -> Snapshot:
        core = self.core
        return Snapshot(
            active_keys=_active_keys(core),
            active=core.active_count,
            active_noninteractive=core.active_noninteractive(),
            contenders=core.contenders_waiting(),
            principal_active={name: core.principal_active(name) for name, _ in PRINCIPALS},
        )

    def _pick_client(self, data: st.DataObject) -> Client:
        if bool(self.known) and data.draw(st.booleans(), label="known client"):
            return data.draw(st.sampled_from(self.known), label="client")
        client = data.draw(clients, label="new client")
        if client not in self.known:
            self.known.append(client)
        return client

    def _admit(self, client: Client, byte_range: ByteRange | None) -> Decision | PendingRequest:
        before = self.before
        core = self.core
        settings_before = core.settings
        request = DownloadRequest(
            principal=client.principal,
            principal_kind=client.kind,
            object_id=client.object_id,
            object_size=client.size,
            byte_range=byte_range,
            download_id=client.download_id,
            client_address=client.address,
            requested_class=client.requested_class,
            ticket=self.tickets.get(client.key),
        )
        sessions_before = core.session_count
        per_request_before = core.stats().request_active
        decision = core.admit(request)
        event(
            "admit: "
            + (decision.reason.value if isinstance(decision, Rejected) else type(decision).__name__)
        )
        # Sessions are for large objects under a session strategy; an active session keeps
        # its slot (and its session admission) after a switch to shared or a raised
        # threshold (R-STRAT-4).
        uses_sessions = client.key in before.active_keys or (
            settings_before.strategy is not Strategy.SHARED
            and client.size > settings_before.session_min_bytes
        )
        if isinstance(decision, PendingRequest):
            assert not uses_sessions
            assert not core.closed
            assert per_request_before == settings_before.max_downloads
            self.waiters[decision.waiter_id] = Waiter(decision, client, request.effective_range)
        elif isinstance(decision, Admitted):
            grant = decision.grant
            assert grant.byte_range == request.effective_range
            if grant.admission == "session":
                assert uses_sessions
                assert decision.ticket is not None
                self._judge_session_grant(grant, client, before, settings_before, sessions_before)
            else:
                assert not uses_sessions
                assert not core.closed
                assert per_request_before < settings_before.max_downloads
            self.in_flight.append(InFlight(grant, client))
        elif isinstance(decision, Queued):
            assert uses_sessions
            assert not core.closed, "after close() nobody is queued (R-RES-4)"
            assert decision.retry_after >= 1
            assert decision.starts_earliest <= decision.starts_at <= decision.starts_latest
            assert decision.check_at >= self.clock.wall()
            told = self.told.get(client.key)
            if told is None or dataclasses.replace(decision, retry_after=told.retry_after) != told:
                assert decision.position is None or 1 <= decision.position <= core.waiting_count
            else:
                # Told its last answer again (an early poll, ADR 0029): the place as it
                # was then, the seconds left until the same checkAt.
                assert decision.retry_after <= told.retry_after
            self.told[client.key] = decision
            assert decision.ticket is not None
            assert _active_keys(core) <= before.active_keys
            if core.active_count < before.active:
                event("an active session yielded its slot")
            self.tickets[client.key] = decision.ticket
        else:
            self._judge_rejection(decision, client, uses_sessions, sessions_before)
        # Several requests may share a step: each is judged against the state just before it.
        self.before = self._snapshot()
        return decision

    def _judge_session_grant(
        self,
        grant: Grant,
        client: Client,
        before: Snapshot,
        config: SchedulerSettings,
        before_sessions: int,
    ) -> None:
        core = self.core
        key = grant.session_key
        assert key in _active_keys(core), "a session grant without a slot"
        if key in before.active_keys:
            # A further range of a session that already held its slot: no new slot.
            assert core.active_count == before.active
            return
        # A new activation: one more slot, for this key only (one slot per key).
        assert not core.closed, "a new session started after close()"
        assert core.active_count == before.active + 1
        assert _active_keys(core) == before.active_keys | {key}
        assert before.active < config.sessions, "a slot beyond `sessions` was handed out"
        if grant.download_class is not DownloadClass.INTERACTIVE:
            assert before.active_noninteractive < config.sessions - config.reserve, (
                "the interactive reserve was given to a non-interactive session"
            )
        assert _shares_ok(before, client.principal, config.per_principal), (
            "a principal at its share got a slot while another principal waited"
        )
        self.granted_keys.add(key)
        event("new activation" if core.session_count > before_sessions else "waiter activated")
        if before.active >= config.sessions - 1:
            event("activation took the last slot")

    def _judge_rejection(
        self, decision: Rejected, client: Client, uses_sessions: bool, sessions_before: int
    ) -> None:
        core = self.core
        config = core.settings
        assert decision.retry_after >= 1
        assert _active_keys(core) <= self.before.active_keys
        reason = decision.reason
        if reason is RejectReason.QUEUE_FULL:
            assert uses_sessions
            assert sessions_before >= config.queue_limit
        elif reason is RejectReason.RANGES_PER_SESSION:
            mine = sum(
                1
                for flight in self.in_flight
                if flight.grant.admission == "session" and flight.grant.session_key == client.key
            )
            assert mine >= config.ranges_per_session
        elif reason is RejectReason.SHUTTING_DOWN:
            assert core.closed
        elif reason is RejectReason.PRINCIPAL_LIMIT:
            if not uses_sessions:
                mine = sum(
                    1
                    for waiter_id, waiter in self.waiters.items()
                    if waiter.client.principal == client.principal
                    and waiter_id not in self.promoted
                )
                assert mine >= config.transfer_queue_per_principal
        elif reason is RejectReason.REQUEST_QUEUE_FULL:
            assert not uses_sessions
            assert core.stats().request_waiting >= config.transfer_queue_limit
        else:  # pragma: no cover - REQUEST_WAIT_EXPIRED is only given by cancel_pending
            raise AssertionError(f"unexpected rejection {decision}")

    def _report(self, flight: InFlight, outcome: DeliveryOutcome) -> None:
        self.in_flight.remove(flight)
        completed = self.core.stats().completed_total
        promoted = self.core.report(flight.grant, outcome)
        if self.core.stats().completed_total > completed:
            event("report completed a session")
        for waiter_id in promoted:
            assert waiter_id in self.waiters, "an unknown waiter was promoted"
            assert waiter_id not in self.promoted, "a waiter was promoted twice"
            self.promoted.add(waiter_id)
        if promoted:
            assert flight.grant.admission == "per-request"
        done = flight.grant.byte_range
        if isinstance(outcome, Delivered) and done is not None:
            key = flight.client.key
            if done.start <= self.next_offset.get(key, 0) < done.end:
                self.next_offset[key] = done.end

    def _resolve(self, waiter_id: int) -> None:
        """The async shell's wait ends: take the promoted place, or be refused."""
        waiter = self.waiters.pop(waiter_id)
        refused = self.core.cancel_pending(waiter.pending)
        if waiter_id in self.promoted:
            self.promoted.discard(waiter_id)
            assert refused is None, "a promoted waiter was refused: its place would leak"
            admitted = self.core.grant_per_request(waiter.pending.download_class, waiter.byte_range)
            assert admitted.grant.admission == "per-request"
            self.in_flight.append(InFlight(admitted.grant, waiter.client))
        else:
            assert refused is not None, "a waiter that was never promoted got a place"
            assert refused.reason is RejectReason.REQUEST_WAIT_EXPIRED
            assert refused.retry_after >= 1

    def _drain_and_check(self) -> None:
        core = self.core
        for waiter_id in list(self.waiters):
            self._resolve(waiter_id)
        for flight in list(self.in_flight):
            self._report(flight, Delivered(flight.grant.byte_range))
        assert not self.promoted
        # The first tick expires no-shows and pauses idle slots; a pause keeps the download
        # for 10 minutes (R-SESS-9), so only the second tick forgets everything.
        idle = core.settings.idle_seconds
        for _ in range(2):
            self.clock.advance(660.0 + idle)
            core.tick()
        assert core.debug_invariants() == []
        assert core.active_count == 0
        assert core.waiting_count == 0
        assert core.session_count == 0
        assert core.grants_in_flight() == 0
        assert core.contenders_waiting() == 0
        assert core.active_noninteractive() == 0
        stats = core.stats()
        for cls, class_stats in stats.per_class.items():
            assert (class_stats.waiting, class_stats.active, class_stats.paused) == (0, 0, 0), cls
        assert stats.request_active == 0
        assert stats.request_waiting == 0
        assert all(core.principal_active(name) == 0 for name, _ in PRINCIPALS)

    # ------------------------------------------------------------------ rules
    @rule(data=st.data(), kind=st.sampled_from(RANGE_KINDS), chunk=st.integers(0, 8))
    def request(self, data: st.DataObject, kind: str, chunk: int) -> None:
        client = self._pick_client(data)
        self._admit(client, _byte_range(kind, client.size, chunk))

    @rule(client=clients, kind=st.sampled_from(RANGE_KINDS), chunk=st.integers(0, 8))
    def request_new(self, client: Client, kind: str, chunk: int) -> None:
        if client not in self.known:
            self.known.append(client)
        self._admit(client, _byte_range(kind, client.size, chunk))

    @rule(data=st.data())
    def request_next(self, data: st.DataObject) -> None:
        """A protocol client reads on: the range after the last one it got in full."""
        self._request_next(self._pick_client(data))

    @precondition(lambda self: bool(self.known))
    @rule()
    def everyone_returns(self) -> None:
        """Every client still around comes back for its next range (a polling round)."""
        for client in list(self.known):
            self._request_next(client)

    def _request_next(self, client: Client) -> None:
        offset = self.next_offset.get(client.key, 0)
        if offset >= client.size:
            offset = 0
        end = min(client.size, offset + CHUNK)
        self._admit(client, ByteRange(offset, end, RangeKind.BOUNDED))

    @precondition(lambda self: bool(self.in_flight))
    @rule(data=st.data())
    def request_again(self, data: st.DataObject) -> None:
        """A client with a response in flight asks for its next range (NAT, parallel reads)."""
        flight = data.draw(st.sampled_from(self.in_flight), label="flight")
        chunk = data.draw(st.integers(0, 8), label="chunk")
        self._admit(flight.client, _byte_range("bounded", flight.client.size, chunk))

    @precondition(lambda self: bool(self.in_flight))
    @rule(data=st.data())
    def deliver(self, data: st.DataObject) -> None:
        flight = data.draw(st.sampled_from(self.in_flight), label="flight")
        whole = data.draw(st.booleans(), label="range given")
        self._report(flight, Delivered(flight.grant.byte_range if whole else None))

    @precondition(lambda self: bool(self.in_flight))
    @rule(data=st.data())
    def send_progress(self, data: st.DataObject) -> None:
        flight = data.draw(st.sampled_from(self.in_flight), label="flight")
        self.core.progress(flight.grant, data.draw(st.integers(0, 4 * MIB), label="bytes"))

    @precondition(lambda self: bool(self.in_flight))
    @rule(data=st.data())
    def interrupt(self, data: st.DataObject) -> None:
        flight = data.draw(st.sampled_from(self.in_flight), label="flight")
        sent = data.draw(st.integers(0, 2 * MIB), label="bytes sent")
        self._report(flight, Interrupted(sent))

    @precondition(lambda self: bool(self.in_flight))
    @rule(data=st.data())
    def fail(self, data: st.DataObject) -> None:
        flight = data.draw(st.sampled_from(self.in_flight), label="flight")
        self._report(flight, Failed())

    @precondition(lambda self: bool(self.in_flight))
    @rule(data=st.data())
    def double_report(self, data: st.DataObject) -> None:
        """Reporting a grant again changes nothing (the port's contract)."""
        flight = data.draw(st.sampled_from(self.in_flight), label="flight")
        self._report(flight, Delivered(flight.grant.byte_range))
        stats = self.core.stats()
        counts = (self.core.active_count, self.core.waiting_count, self.core.session_count)
        assert self.core.report(flight.grant, Delivered(flight.grant.byte_range)) == []
        assert self.core.report(flight.grant, Failed()) == []
        assert (self.core.active_count, self.core.waiting_count, self.core.session_count) == counts
        assert self.core.stats().request_active == stats.request_active

    @precondition(lambda self: bool(self.in_flight))
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        """The client cancels: every response it has in flight is interrupted."""
        client = data.draw(st.sampled_from(self.in_flight), label="flight").client
        for flight in [f for f in self.in_flight if f.client.key == client.key]:
            self._report(flight, Interrupted())

    @precondition(lambda self: bool(self.known))
    @rule(data=st.data())
    def disconnect(self, data: st.DataObject) -> None:
        """The client stops coming back; only the scheduler's timers can clean up."""
        client = data.draw(st.sampled_from(self.known), label="client")
        self.known.remove(client)
        self.tickets.pop(client.key, None)
        self.next_offset.pop(client.key, None)

    @precondition(lambda self: bool(self.waiters))
    @rule(data=st.data())
    def end_request_wait(self, data: st.DataObject) -> None:
        """A per-request wait ends: promoted (take the place) or timed out (refused)."""
        self._resolve(data.draw(st.sampled_from(sorted(self.waiters)), label="waiter"))

    @rule(
        seconds=st.one_of(
            st.floats(0.01, 6.0),
            st.sampled_from([5.5, 29.0, 31.0, 45.0, 61.0, 95.0]),
            st.sampled_from([299.0, 330.0, 601.0, 700.0]),
        ),
        then_tick=st.booleans(),
    )
    def advance(self, seconds: float, then_tick: bool) -> None:
        """Time passes: small steps, beyond the idle pause, beyond the 10-minute retention."""
        self.clock.advance(seconds)
        if then_tick:
            self._tick()

    @rule()
    def tick(self) -> None:
        self._tick()

    def _tick(self) -> None:
        outcome = self.core.tick()
        for name in ("expired", "idle_released", "promoted", "marked", "preempted"):
            if getattr(outcome, name):
                event(f"tick: {name}")
        assert outcome.expired >= 0
        assert outcome.idle_released >= 0
        assert outcome.marked >= 0
        assert outcome.promoted >= 0
        assert _active_keys(self.core) <= self.before.active_keys, "a tick handed out a slot"

    @rule(
        data=st.data(),
        strategy=st.sampled_from(list(Strategy)),
        preempt=st.booleans(),
        weights=st.sampled_from([(8, 4, 2, 1), (1, 1, 1, 1), (1, 2, 4, 8), (1000, 10, 2, 1)]),
        aging_minutes=st.sampled_from([0.0, 0.5, 10.0]),
        idle_seconds=st.sampled_from([5.0, 30.0, 60.0]),
        ranges_per_session=st.integers(1, 3),
        session_min_bytes=st.sampled_from([16 * MIB, 32 * MIB]),
    )
    def reconfigure(
        self,
        data: st.DataObject,
        strategy: Strategy,
        preempt: bool,
        weights: tuple[int, int, int, int],
        aging_minutes: float,
        idle_seconds: float,
        ranges_per_session: int,
        session_min_bytes: int,
    ) -> None:
        current = self.core.settings
        changes: dict[str, object] = {
            "strategy": strategy,
            "preempt": preempt,
            "weights": weights,
            "aging_minutes": aging_minutes,
            "idle_seconds": idle_seconds,
            "ranges_per_session": ranges_per_session,
            "session_min_bytes": session_min_bytes,
        }
        sessions = current.sessions
        if data.draw(st.booleans(), label="change sessions"):
            sessions = data.draw(st.integers(1, 6), label="sessions")
            changes["sessions"] = sessions
        if data.draw(st.booleans(), label="change reserve"):
            changes["reserve"] = data.draw(st.integers(0, sessions - 1), label="reserve")
        if data.draw(st.booleans(), label="change per_principal"):
            changes["per_principal"] = data.draw(st.integers(1, sessions), label="per_principal")
        updated = current.with_changes(**changes)
        # Environment-only fields are not operator settings: try to change them too.
        updated = updated.with_changes(queue_limit=1000, max_downloads=50)
        self.core.configure(updated)
        config = self.core.settings
        assert config.sessions == sessions
        assert config.strategy is strategy
        assert config.reserve <= sessions - 1
        assert config.per_principal <= sessions
        assert config.queue_limit == current.queue_limit
        assert config.max_downloads == current.max_downloads
        assert _active_keys(self.core) == self.before.active_keys, "configure moved slots"

    @rule(
        data=st.data(),
        bad=st.sampled_from(
            [
                ("download_class", "gold"),
                ("download_class", ""),
                ("download_id", ""),
                ("download_id", "has space"),
                ("download_id", "x" * 129),
                ("download_id", "naïve"),
            ]
        ),
    )
    def invalid_request(self, data: st.DataObject, bad: tuple[str, str]) -> None:
        """A malformed header is a 400 naming the field, and takes no place at all."""
        client = data.draw(clients, label="client")
        name, value = bad
        counts = (self.core.session_count, self.core.waiting_count, self.core.grants_in_flight())
        request = DownloadRequest(
            principal=client.principal,
            principal_kind=client.kind,
            object_id=client.object_id,
            object_size=client.size,
            download_id=value if name == "download_id" else client.download_id,
            requested_class=value if name == "download_class" else client.requested_class,
        )
        with pytest.raises(InvalidRequestError) as raised:
            self.core.admit(request)
        assert raised.value.field == name
        assert counts == (
            self.core.session_count,
            self.core.waiting_count,
            self.core.grants_in_flight(),
        )

    @precondition(lambda self: self.steps >= 60 and not self.core.closed)
    @rule()
    def close(self) -> None:
        drained = self.core.close()
        assert sorted(drained) == sorted(w for w in self.waiters if w not in self.promoted)
        for waiter_id in drained:
            # The shell answers these Rejected(SHUTTING_DOWN); they never held a place.
            del self.waiters[waiter_id]
        assert self.core.stats().request_waiting == 0

    @precondition(lambda self: bool(self.in_flight or self.waiters or self.core.session_count))
    @rule()
    def drain(self) -> None:
        self._drain_and_check()

    # ------------------------------------------------------------------ invariants
    @invariant()
    def consistent(self) -> None:
        core = self.core
        self.steps += 1
        assert core.debug_invariants() == []
        config = core.settings
        keys = _active_keys(core)
        assert len(keys) == core.active_count
        # Only an admitted range starts a session: no slot is taken silently.
        assert keys - self.before.active_keys <= self.granted_keys
        # Slots are never handed out beyond `sessions` (after a lowering, active sessions
        # keep theirs, so the count may only shrink until it fits again).
        assert core.active_count <= max(config.sessions, self.before.active)
        if core.active_count > config.sessions:
            assert keys <= self.before.active_keys
        assert core.session_count <= config.queue_limit
        stats = core.stats()
        assert stats.active == core.active_count
        assert stats.waiting == core.waiting_count
        assert stats.active + stats.waiting + stats.paused == core.session_count
        assert stats.sessions_limit == config.sessions
        assert core.grants_in_flight() == len(self.in_flight)
        per_request = sum(1 for f in self.in_flight if f.grant.admission == "per-request")
        assert stats.request_active == per_request + len(self.promoted)
        assert stats.request_active <= config.max_downloads
        assert stats.request_waiting == len(self.waiters) - len(self.promoted)
        assert 0 <= core.active_noninteractive() <= core.active_count
        self.before = self._snapshot()
        self.granted_keys = set()

    def teardown(self) -> None:
        self._drain_and_check()


TestSchedulerMachine = SchedulerMachine.TestCase
