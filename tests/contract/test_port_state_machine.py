"""A stateful model of any ``DownloadScheduler``, driven only through its async port.

``tests/unit/test_state_machine.py`` proves the in-memory core from the inside; this
machine proves what a caller of the port can see, on every implementation: random
clients ask (newcomers, polls with their ticket, further ranges), responses end as
delivered, interrupted or failed, progress is reported, the scheduler ticks, the
operator changes a few settings and the :class:`FakeClock` moves. After every step:

- active sessions never exceed ``sessions`` — after ``configure`` lowered it, active
  sessions keep their slots but nothing is granted above the new limit (R-SET-3);
- responses in flight per session never exceed ``ranges_per_session`` (R-SESS-11);
- no bound of R-RES-1 is exceeded (sessions in total, per-request places and waiters);
- every answer is well formed: positions ≥ 1, ``Retry-After`` ≥ 1, ordered estimates;
- ``drain`` reports every grant exactly once, lets an hour pass and ticks: every counter
  is back to zero (R-RES-3), and a grant reported twice changes nothing.

The port is async and a hypothesis state machine is not, so each machine runs its
scheduler on an event loop of its own in a helper thread (an anyio blocking portal) and
every call crosses that portal; ``teardown`` closes the scheduler, its pool, its schema
and the loop. The PostgreSQL machine runs fewer, shorter examples to stay under CI.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from dataclasses import dataclass
from typing import TypeVar

from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from arkvory_sched import (
    Admitted,
    ByteRange,
    Decision,
    Delivered,
    DownloadRequest,
    DownloadScheduler,
    Failed,
    Grant,
    InMemoryDownloadScheduler,
    Interrupted,
    PrincipalKind,
    Queued,
    RangeKind,
    Rejected,
    SchedulerSettings,
    SchedulerStats,
    Strategy,
)
from arkvory_sched.postgres import PostgresScheduler
from arkvory_sched.testing import TICKET_KEYS, FakeClock
from tests.pg import drop_schema, new_schema, require_database

T = TypeVar("T")

MIB = 1024 * 1024
RANGE = 8 * MIB
RANGES_PER_SESSION = 2

PRINCIPALS: tuple[tuple[str, PrincipalKind, str | None], ...] = (
    ("ann", PrincipalKind.PERSON, None),
    ("bob", PrincipalKind.PERSON, "bulk"),
    ("ci", PrincipalKind.SERVICE, None),
    ("mirror", PrincipalKind.SERVICE, "background"),
    ("link-7", PrincipalKind.LINK, None),
)
# One object below the 16 MiB session threshold (per request), three above it.
SIZES = (3 * MIB, 20 * MIB, 40 * MIB, 72 * MIB)
DOWNLOAD_IDS: tuple[str | None, ...] = (None, "dl-a", "dl-b")

BASE = SchedulerSettings(
    sessions=3,
    reserve=0,
    per_principal=1,
    ranges_per_session=RANGES_PER_SESSION,
    idle_seconds=30.0,
    aging_minutes=1.0,
    max_downloads=2,
    transfer_queue_limit=4,
    transfer_queue_per_principal=2,
    transfer_queue_wait_seconds=0.0,  # a full per-request queue answers at once
    queue_limit=8,
    queue_per_principal=4,
)
# Settings an operator may apply while sessions run and wait (all valid, R-SET-2).
CONFIGURATIONS: tuple[SchedulerSettings, ...] = (
    BASE,
    BASE.with_changes(sessions=1, per_principal=1),
    BASE.with_changes(sessions=5, reserve=1, per_principal=2),
    BASE.with_changes(strategy=Strategy.SMALLEST_FIRST),
    BASE.with_changes(aging_minutes=0.0, preempt=False),
    BASE.with_changes(strategy=Strategy.SHARED),
)


@dataclass(frozen=True, slots=True)
class Client:
    """One downloading program: who, what, and how it names its download."""

    principal: str
    kind: PrincipalKind
    lowered: str | None
    size: int
    download_id: str | None
    address: str

    def request(self, chunk: int, ticket: str | None) -> DownloadRequest:
        chunks = -(-self.size // RANGE)
        start = (chunk % chunks) * RANGE
        return DownloadRequest(
            principal=self.principal,
            principal_kind=self.kind,
            object_id=f"objects/{self.size}.bin",
            object_size=self.size,
            byte_range=ByteRange(start, min(self.size, start + RANGE), RangeKind.BOUNDED),
            download_id=self.download_id,
            client_address=self.address,
            requested_class=self.lowered,
            ticket=ticket,
        )


clients = st.builds(
    lambda who, size, download_id, address: Client(
        principal=who[0],
        kind=who[1],
        lowered=who[2],
        size=size,
        download_id=download_id,
        address=address,
    ),
    st.sampled_from(PRINCIPALS),
    st.sampled_from(SIZES),
    st.sampled_from(DOWNLOAD_IDS),
    st.sampled_from(("192.0.2.1", "192.0.2.2")),
)


class PortMachine(RuleBasedStateMachine):
    """Random traffic through the port of one scheduler; subclasses say which one."""

    def __init__(self) -> None:
        super().__init__()
        self._stack = ExitStack()
        self.portal: BlockingPortal = self._stack.enter_context(start_blocking_portal())
        self.clock = FakeClock()
        self.scheduler = self.call(self.open)
        self.known: list[Client] = []
        self.tickets: dict[Client, str] = {}
        self.asked: dict[Client, int] = {}
        self.in_flight: list[Grant] = []
        self.reported: list[Grant] = []
        # Sessions told to wait while a response of theirs still runs: a yield at a
        # further range's request (R-PREEMPT-1); the running response ends as it may.
        self.yielded_running: set[bytes] = set()
        self.session_of: dict[Client, bytes] = {}
        self.allowed_active = BASE.sessions

    # ------------------------------------------------------------------ the store
    async def open(self) -> DownloadScheduler:
        raise NotImplementedError

    async def shut(self) -> None:
        await self.scheduler.close()

    def call(self, function: Callable[[], Awaitable[T]]) -> T:
        return self.portal.call(function)

    def teardown(self) -> None:
        try:
            self.call(self.shut)
        finally:
            self._stack.close()

    # ------------------------------------------------------------------ helpers
    def stats(self) -> SchedulerStats:
        return self.call(self.scheduler.stats)

    def admit(self, client: Client) -> Decision:
        asked = self.asked.get(client, 0)
        request = client.request(asked, self.tickets.get(client))
        decision = self.call(lambda: self.scheduler.admit(request))
        check_answer(decision, self.clock.wall())
        if isinstance(decision, Admitted):
            self.asked[client] = asked + 1
            self.in_flight.append(decision.grant)
            self.yielded_running.discard(decision.grant.session_key)
            if decision.grant.admission == "session":
                self.session_of[client] = decision.grant.session_key
        elif isinstance(decision, Queued) and client in self.session_of:
            # A session told to wait while its responses run has just yielded.
            key = self.session_of[client]
            if any(grant.session_key == key for grant in self.in_flight):
                self.yielded_running.add(key)
        if isinstance(decision, Admitted | Queued) and decision.ticket is not None:
            self.tickets[client] = decision.ticket
        return decision

    def report(self, grant: Grant, outcome: Delivered | Interrupted | Failed) -> None:
        self.in_flight.remove(grant)
        self.reported.append(grant)
        self.call(lambda: self.scheduler.report(grant, outcome))

    # ------------------------------------------------------------------ rules
    @rule(data=st.data())
    def newcomer(self, data: st.DataObject) -> None:
        client = data.draw(clients, label="client")
        if client not in self.known:
            self.known.append(client)
        self.admit(client)

    @precondition(lambda self: bool(self.known))
    @rule(data=st.data())
    def comes_back(self, data: st.DataObject) -> None:
        """A known client polls with its ticket, or asks for its next range."""
        self.admit(data.draw(st.sampled_from(self.known), label="known client"))

    @precondition(lambda self: bool(self.in_flight))
    @rule(data=st.data(), how=st.sampled_from(("delivered", "delivered", "interrupted", "failed")))
    def response_ends(self, data: st.DataObject, how: str) -> None:
        grant = data.draw(st.sampled_from(self.in_flight), label="grant")
        outcome: Delivered | Interrupted | Failed
        if how == "delivered":
            outcome = Delivered(grant.byte_range)
        elif how == "interrupted":
            outcome = Interrupted(bytes_sent=1024)
        else:
            outcome = Failed()
        self.report(grant, outcome)

    @precondition(lambda self: bool(self.in_flight))
    @rule(data=st.data(), nbytes=st.integers(1, RANGE))
    def progress(self, data: st.DataObject, nbytes: int) -> None:
        grant = data.draw(st.sampled_from(self.in_flight), label="grant")
        self.call(lambda: self.scheduler.progress(grant, nbytes))

    @precondition(lambda self: bool(self.reported))
    @rule(data=st.data())
    def reported_again(self, data: st.DataObject) -> None:
        """Reporting a grant a second time is a no-op (the port's contract)."""
        grant = data.draw(st.sampled_from(self.reported), label="reported grant")
        before = self.stats()
        self.call(lambda: self.scheduler.report(grant, Delivered(grant.byte_range)))
        after = self.stats()
        assert (after.active, after.waiting, after.paused, after.request_active) == (
            before.active,
            before.waiting,
            before.paused,
            before.request_active,
        )

    @rule()
    def tick(self) -> None:
        self.call(self.scheduler.tick)

    @rule(seconds=st.sampled_from((0.5, 1.0, 2.0, 6.0, 31.0, 65.0, 301.0, 700.0)))
    def time_passes(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @rule(settings=st.sampled_from(CONFIGURATIONS))
    def configure(self, settings: SchedulerSettings) -> None:
        active = self.stats().active
        self.call(lambda: self.scheduler.configure(settings))
        # R-SET-3: active sessions keep their slots; nothing is granted above the limit.
        self.allowed_active = max(settings.sessions, active)

    @rule()
    def drain(self) -> None:
        """Every response ends, an hour passes: nothing is left anywhere (R-RES-3)."""
        for grant in list(self.in_flight):
            self.report(grant, Interrupted())
        for _ in range(3):  # idle → paused, then the pause and every waiter expire
            self.clock.advance(1_200.0)
            self.call(self.scheduler.tick)
        stats = self.stats()
        assert (stats.active, stats.waiting, stats.paused) == (0, 0, 0), stats
        assert (stats.request_active, stats.request_waiting) == (0, 0), stats
        self.allowed_active = self.call(self.settings_now).sessions

    async def settings_now(self) -> SchedulerSettings:
        return self.scheduler.settings

    # ------------------------------------------------------------------ invariants
    @invariant()
    def bounds_hold(self) -> None:
        stats = self.stats()
        limit = self.scheduler.settings
        # R-PG-2, R-SET-3: never above the limit, except sessions kept over a lowering.
        assert stats.active <= self.allowed_active, (stats.active, self.allowed_active)
        self.allowed_active = max(limit.sessions, min(self.allowed_active, stats.active))
        # R-RES-1: sessions in total, per-request places and waiters are bounded.
        assert stats.active + stats.waiting + stats.paused <= limit.queue_limit, stats
        assert stats.request_active <= limit.max_downloads, stats
        assert stats.request_waiting <= limit.transfer_queue_limit, stats
        assert stats.sessions_limit == limit.sessions
        # R-SESS-11: per session, at most ranges_per_session responses at once.
        per_session: dict[bytes, int] = {}
        for grant in self.in_flight:
            if grant.admission == "session":
                per_session[grant.session_key] = per_session.get(grant.session_key, 0) + 1
        assert max(per_session.values(), default=0) <= RANGES_PER_SESSION, per_session
        self.yielded_running &= set(per_session)  # their last response has ended
        granted_sessions = len(per_session.keys() - self.yielded_running)
        assert granted_sessions <= stats.active or stats.closed, (granted_sessions, stats)


def check_answer(decision: Decision, now: float) -> None:
    """What every answer must look like, whatever the queue (R-SESS-5, R-EST-3)."""
    if isinstance(decision, Queued):
        assert decision.position is None or decision.position >= 1, decision
        assert decision.retry_after >= 1, decision
        assert decision.starts_earliest <= decision.starts_at <= decision.starts_latest
        assert decision.check_at > now, (decision, now)
    elif isinstance(decision, Rejected):
        assert decision.retry_after >= 1, decision


class InMemoryMachine(PortMachine):
    async def open(self) -> DownloadScheduler:
        return InMemoryDownloadScheduler(BASE, clock=self.clock, ticket_keys=TICKET_KEYS)


class PostgresMachine(PortMachine):
    """Each example on a fresh schema, dropped in ``teardown`` with the pool."""

    def __init__(self) -> None:
        self.url = require_database()  # skipped without a database, failed under CI
        self.schema = ""
        super().__init__()

    async def open(self) -> DownloadScheduler:
        self.schema = await new_schema("machine")
        return await PostgresScheduler.connect(
            self.url,
            schema=self.schema,
            settings=BASE,
            clock=self.clock,
            ticket_keys=TICKET_KEYS,
            migrate=False,
            pool_size=2,
        )

    async def shut(self) -> None:
        try:
            scheduler = self.scheduler
            await scheduler.close()
            assert isinstance(scheduler, PostgresScheduler)
            await scheduler.disconnect()
        finally:
            await drop_schema(self.schema)


def test_a_yield_while_a_response_runs_keeps_the_bounds() -> None:
    """Found by the machine: a person waits, and a bulk download that has held its slot
    for a minute asks for a further range while its first still runs. It yields there
    (R-PREEMPT-1), and its running response ends as it may: the session waits while a
    grant of it is in flight, on both stores alike. The bounds must say so."""
    ann, bob = ("ann", PrincipalKind.PERSON, None), ("bob", PrincipalKind.PERSON, "bulk")
    holders = [
        Client(*ann, 20 * MIB, None, "192.0.2.1"),
        Client(*ann, 20 * MIB, "dl-a", "192.0.2.1"),
        Client(*bob, 20 * MIB, "dl-a", "192.0.2.1"),
    ]
    person = Client(*ann, 20 * MIB, None, "192.0.2.2")
    machine = InMemoryMachine()
    try:
        machine.tick()
        for client in [*holders, person]:
            machine.known.append(client)
            machine.admit(client)
        machine.clock.advance(65.0)
        machine.admit(person)
        machine.tick()  # asks the bulk download to yield
        assert isinstance(machine.admit(holders[2]), Queued)  # its first range still runs
        assert machine.stats().preemptions_total == 1
        machine.bounds_hold()
    finally:
        machine.teardown()


_hypothesis = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}

TestInMemoryPort = InMemoryMachine.TestCase
TestInMemoryPort.settings = settings(max_examples=60, stateful_step_count=40, **_hypothesis)  # type: ignore[arg-type]


TestPostgresPort = PostgresMachine.TestCase
TestPostgresPort.settings = settings(max_examples=10, stateful_step_count=20, **_hypothesis)  # type: ignore[arg-type]
