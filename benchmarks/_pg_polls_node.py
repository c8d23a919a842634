"""One server process of ``benchmarks.pg_polls``: a ``PostgresScheduler`` with its tick
loop, and the clients that call it straight through the port (no HTTP: on two CPUs a
Python HTTP client could not offer the load).

The parent starts one such process per node (``spawn``), waits for ``"ready"``, then
sends jobs over a pipe and gets a list of :class:`Period` back per job; ``None`` ends
the process. Node 0 admits the two slot holders before it says it is ready, so nobody
else is ever admitted, and keeps them fetching a range every few seconds (a slot idle
for ``idle_seconds`` would be released).

Every statement the process sends is counted where asyncpg sends it (the ``execute``,
``fetch``, ``fetchrow`` and ``fetchval`` of ``Connection``, as
``tests/postgres/_helpers.statements_sent`` does; a transaction's ``BEGIN`` and
``COMMIT`` go through ``execute`` and count too), charged to the client task that sent
it through a context variable: so a poll knows whether it reached the database.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import traceback
from collections import Counter
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection as Pipe
from typing import Any, Final

from asyncpg.connection import Connection

from arkvory_sched import (
    Admitted,
    ByteRange,
    Decision,
    Delivered,
    DownloadRequest,
    PrincipalKind,
    Queued,
    Rejected,
    RejectReason,
    SchedulerSettings,
)
from arkvory_sched._session_keys import session_key
from arkvory_sched._tickets import TicketSigner
from arkvory_sched._ticking import run_tick_loop
from arkvory_sched.policy import NEWCOMER_CHECK_SECONDS
from arkvory_sched.postgres import PostgresScheduler
from benchmarks.pg_scale import RANGE_BYTES, ScaleWorkload, holder_request

MIB: Final = 1024 * 1024
HOLDERS: Final = (1, 2)  # pg_scale's release slot holders, 64 GiB objects each
HOLDER_GAP_S: Final = 5.0  # a range per holder this often, well inside idle_seconds
WAITER_BYTES: Final = 40 * MIB  # above session_min_bytes: every poll is a session's
STORM_GAP_S: Final = 0.05  # a storming client polls 20 times a second
JITTER_S: Final = (0.05, 0.25)  # what a well-behaved client adds to Retry-After
STRIDE: Final = 2_654_435_761  # a prime: polls walk the whole queue, none twice
DRAIN_S: Final = 10.0  # how long a step waits for its last answers
SHORT: Final = "stormer told 1 s"  # a storming client's polls after Retry-After: 1


def poll_settings(queue_limit: int) -> SchedulerSettings:
    """Both figures' settings: two slots, both held, and a link so fast that every
    waiter hears it starts in a moment: well-behaved clients poll every 1 to 3 s."""
    return SchedulerSettings(
        sessions=2,
        reserve=0,
        bandwidth=10**12,
        queue_limit=queue_limit,
        queue_per_principal=4_096,
    )


# ====================================================================== what is sent
@dataclass(frozen=True, slots=True)
class NodePlan:
    """What a server process needs to start (pickled to the child)."""

    dsn: str  # with application_name, so the parent finds its backends
    schema: str
    key: bytes  # the fleet's ticket key
    node: int
    nodes: int
    queue_limit: int


@dataclass(frozen=True, slots=True)
class StormJob:
    """Figure 1: ``clients`` waiting downloads of the fleet arriving one after the other
    from ``arrive_from`` to ``arrive_by`` (wall time), every ``storm_every``-th one
    storming, the first included; measured over ``periods``. The storm blows in the
    periods in ``storm``; its clients poll at their ``checkAt`` in the others."""

    periods: tuple[tuple[float, float], ...]
    storm: frozenset[int]
    arrive_from: float
    arrive_by: float
    clients: int
    storm_every: int

    def node_of(self, number: int, nodes: int) -> int:
        """Arrival ``number``'s process: turn by turn, shifted after each stormer so
        that every process gets a third of the stormers."""
        return (number + number // self.storm_every) % nodes

    def kind_of(self, number: int) -> str:
        return "stormer" if number % self.storm_every == 0 else "waiter"

    def arrival(self, number: int) -> float:
        return self.arrive_from + (self.arrive_by - self.arrive_from) * number / self.clients


@dataclass(frozen=True, slots=True)
class StepJob:
    """Figure 2, one step: ``rate`` polls a second from the fleet, open loop, from
    ``offer_from`` on, measured over ``period``; one newcomer after every
    ``polls_per_newcomer`` polls; the polls walk a queue of ``waiting`` filled by
    ``pg_scale.fill_postgres``."""

    period: tuple[float, float]
    offer_from: float
    rate: float
    polls_per_newcomer: int
    waiting: int


@dataclass(slots=True)
class Period:
    """One measured period of one process. ``kind`` is the client's (``waiter``,
    ``stormer``, ``poll``, ``newcomer``) or, for statements, the sender's (those and
    ``tick``, ``holder``, ``server``)."""

    seconds: dict[str, list[float]] = field(default_factory=dict)  # time of admit
    lags: list[float] = field(default_factory=list)  # open loop: start − schedule
    calls: Counter[str] = field(default_factory=Counter)
    local: Counter[str] = field(default_factory=Counter)  # calls that sent no statement
    statements: Counter[str] = field(default_factory=Counter)
    unexpected: Counter[str] = field(default_factory=Counter)  # answers of the wrong kind
    # Rejected(storage_unavailable): no connection or no answer in time (the pool's
    # timeouts), or the database away.
    storage_errors: Counter[str] = field(default_factory=Counter)
    cpu: float = 0.0  # this process's CPU seconds over the period


# ====================================================================== counting
@dataclass(slots=True)
class _Sender:
    kind: str
    statements: int = 0


_SENDER: ContextVar[_Sender | None] = ContextVar("pg_polls_sender", default=None)


class Recorder:
    """This process's periods and the statements sent in each."""

    def __init__(self) -> None:
        self.periods: tuple[tuple[float, float], ...] = ()
        self.found: list[Period] = []

    def start(self, periods: tuple[tuple[float, float], ...]) -> None:
        self.periods, self.found = periods, [Period() for _ in periods]

    def index(self, wall: float) -> int:
        for number, (begin, end) in enumerate(self.periods):
            if begin <= wall < end:
                return number
        return -1

    def statement(self) -> None:
        sender = _SENDER.get()
        if sender is not None:
            sender.statements += 1
        number = self.index(time.time())
        if number >= 0:
            self.found[number].statements[sender.kind if sender else "server"] += 1

    def install(self) -> None:
        """Count every statement from now on (the process's own: never undone)."""
        for name in ("execute", "fetch", "fetchrow", "fetchval"):
            original = getattr(Connection, name)

            def counted(
                conn: Connection, *args: Any, _original: Any = original, **kwargs: Any
            ) -> Any:
                self.statement()
                return _original(conn, *args, **kwargs)

            setattr(Connection, name, counted)

    async def timed(
        self, scheduler: PostgresScheduler, kind: str, request: DownloadRequest, due: float = 0.0
    ) -> tuple[Decision, Period | None]:
        """``admit`` timed and charged to the period it started in (None: outside)."""
        sender = _SENDER.get()
        assert sender is not None, "clients run in tasks that name their sender"
        before, wall = sender.statements, time.time()
        started = time.perf_counter()
        decision = await scheduler.admit(request)
        seconds = time.perf_counter() - started
        number = self.index(wall)
        if number < 0:
            return decision, None
        period = self.found[number]
        period.seconds.setdefault(kind, []).append(seconds)
        period.calls[kind] += 1
        error = _storage_error(decision)
        period.local[kind] += sender.statements == before and not error
        if due:
            period.lags.append(wall - due)
        period.storage_errors[kind] += error
        return decision, period

    async def cpu(self) -> None:
        """This process's CPU time over each period."""
        for number, (begin, end) in enumerate(self.periods):
            await _sleep_until(begin)
            used = time.process_time()
            await _sleep_until(end)
            self.found[number].cpu = time.process_time() - used


def _storage_error(decision: Decision) -> bool:
    return isinstance(decision, Rejected) and decision.reason is RejectReason.STORAGE_UNAVAILABLE


def _reason(decision: Decision) -> str:
    return decision.reason if isinstance(decision, Rejected) else ""


async def _sleep_until(wall: float) -> None:
    await asyncio.sleep(max(0.0, wall - time.time()))


def _sent_by(kind: str) -> None:
    """Charge the statements of the current task (and the tasks it starts) to ``kind``."""
    _SENDER.set(_Sender(kind))


# ====================================================================== the node
class Node:
    """A server process: its scheduler, tick loop, holders and clients."""

    def __init__(self, plan: NodePlan, scheduler: PostgresScheduler, recorder: Recorder) -> None:
        self.plan = plan
        self.scheduler = scheduler
        self.recorder = recorder
        self.sequence = 0  # figure 2: this node's requests so far, over all steps
        self.signer = TicketSigner([plan.key])

    async def tick(self) -> None:
        _sent_by("tick")
        await run_tick_loop(self.scheduler)

    async def admit_holders(self) -> list[DownloadRequest]:
        """On the empty queue, the downloads that hold both slots."""
        _sent_by("holder")
        holders = []
        for number in HOLDERS:
            request = holder_request(number)
            decision = await self.scheduler.admit(request)
            if not isinstance(decision, Admitted):
                raise RuntimeError(f"slot holder {number} was answered {decision!r}")
            await self.scheduler.report(decision.grant, Delivered(request.byte_range))
            holders.append(request)
        return holders

    async def keep_holders(self, holders: list[DownloadRequest]) -> None:
        """Each holder fetches its next range every few seconds, forever."""
        _sent_by("holder")
        for offset in range(RANGE_BYTES, 2**62, RANGE_BYTES):
            await asyncio.sleep(HOLDER_GAP_S)
            for holder in holders:
                request = replace(holder, byte_range=ByteRange(offset, offset + RANGE_BYTES))
                decision = await self.scheduler.admit(request)
                if not isinstance(decision, Admitted):
                    raise RuntimeError(f"slot holder lost its slot: {decision!r}")
                await self.scheduler.report(decision.grant, Delivered(request.byte_range))

    # ------------------------------------------------------------------ figure 1
    async def storm(self, job: StormJob) -> None:
        """The waiters of this node until the last period ends."""
        self.recorder.start(job.periods)
        numbers = range(job.clients)
        mine = [n for n in numbers if job.node_of(n, self.plan.nodes) == self.plan.node]
        await asyncio.gather(self.recorder.cpu(), *(self.client(job, n) for n in mine))

    def storming(self, job: StormJob, wall: float) -> bool:
        return self.recorder.index(wall) in job.storm

    async def client(self, job: StormJob, number: int) -> None:
        """One waiting download: it arrives, then polls with the last ticket it was
        given, ``Retry-After`` plus a little jitter later; a ``stormer`` polls 20 times
        a second instead while the storm blows. A stormer's polls after an answer of
        ``Retry-After: 1`` (the head, a marked waiter) are told apart (``SHORT``): a
        1-s delay is within the early-poll tolerance, so none of them is early."""
        kind = job.kind_of(number)
        sender = _Sender(kind)
        _SENDER.set(sender)
        request = DownloadRequest(
            principal=f"ci-{number % 100}",
            principal_kind=PrincipalKind.SERVICE,
            object_id=f"artifact-{number}",
            object_size=WAITER_BYTES,
            byte_range=ByteRange(0, MIB),
            download_id=f"dl-{number}",
        )
        end = job.periods[-1][1]
        due, told = job.arrival(number), NEWCOMER_CHECK_SECONDS
        while due < end:
            await _sleep_until(due)
            sender.kind = SHORT if kind == "stormer" and told <= 1 else kind
            decision, period = await self.recorder.timed(self.scheduler, sender.kind, request)
            answered = time.time()
            if isinstance(decision, Queued):
                request = replace(request, ticket=decision.ticket)
                told = decision.retry_after
                due = on_time = answered + told + random.uniform(*JITTER_S)
                if kind == "stormer" and self.storming(job, answered):
                    due = answered + STORM_GAP_S
                    await _sleep_until(due)
                    if not self.storming(job, due):
                        due = on_time  # the storm is over: back to Retry-After
                continue
            if period is not None and not _storage_error(decision):
                period.unexpected[f"{kind}: {type(decision).__name__} {_reason(decision)}"] += 1
            if not isinstance(decision, Rejected):
                return  # admitted: a holder lost its slot; counted, and this one stops
            due = answered + decision.retry_after

    # ------------------------------------------------------------------ figure 2
    async def step(self, job: StepJob) -> None:
        """Requests started on a fixed schedule (open loop), whatever the answers."""
        self.recorder.start((job.period,))
        cpu = asyncio.create_task(self.recorder.cpu())
        workload = ScaleWorkload(job.waiting)
        share = job.polls_per_newcomer + 1  # requests per newcomer
        gap = self.plan.nodes / (job.rate * share / job.polls_per_newcomer)
        running: set[asyncio.Task[None]] = set()
        due = job.offer_from
        while due < job.period[1]:
            await _sleep_until(due)
            number = self.sequence * self.plan.nodes + self.plan.node
            self.sequence += 1
            if number % share == share - 1:
                request, kind = workload.request(job.waiting + number), "newcomer"
            else:
                request, kind = self.ticketed(workload, number * STRIDE % job.waiting), "poll"
            task = asyncio.create_task(self.offered(kind, request, due))
            running.add(task)
            task.add_done_callback(running.discard)
            due += gap
        await asyncio.wait([cpu, *running], timeout=DRAIN_S)

    def ticketed(self, workload: ScaleWorkload, index: int) -> DownloadRequest:
        """Waiter ``index``'s poll with a ticket signed by the fleet's key, as the one it
        was given last would be. For a returning waiter only the signature and the age
        count: the stored arrival stands, so any arrival before now does."""
        request = workload.request(index)
        key = session_key(
            request.principal, request.object_id, request.download_id, request.client_address
        )
        now_ms = int(time.time() * 1000)
        return replace(request, ticket=self.signer.issue(key, now_ms - 300_000, now_ms))

    async def offered(self, kind: str, request: DownloadRequest, due: float) -> None:
        _sent_by(kind)
        decision, period = await self.recorder.timed(self.scheduler, kind, request, due)
        if period is None or _storage_error(decision):
            return  # outside the period, or counted as the database's error already
        if not isinstance(decision, Queued):
            period.unexpected[f"{kind}: {type(decision).__name__} {_reason(decision)}"] += 1
        elif (decision.position is not None) != (kind == "poll"):
            # A poll is told its place, a newcomer not yet (R-EST-3).
            period.unexpected[f"{kind}: position {decision.position}"] += 1


# ====================================================================== the process
def serve(plan: NodePlan, pipe: Pipe) -> None:
    """The child's entry point: any failure goes back to the parent as text."""
    try:
        asyncio.run(_serve(plan, pipe))
    except BaseException:
        with contextlib.suppress(OSError):
            pipe.send(("error", f"node {plan.node}: {traceback.format_exc()}"))
        raise


async def _serve(plan: NodePlan, pipe: Pipe) -> None:
    recorder = Recorder()
    recorder.install()
    scheduler = await PostgresScheduler.connect(
        plan.dsn,
        schema=plan.schema,
        settings=poll_settings(plan.queue_limit),
        ticket_keys=[plan.key],
        node_id=f"pg-polls-{plan.node}",
        migrate=False,
    )
    node = Node(plan, scheduler, recorder)
    background = [asyncio.create_task(node.tick())]
    try:
        if plan.node == 0:
            holders = await node.admit_holders()
            background.append(asyncio.create_task(node.keep_holders(holders)))
        pipe.send(("ready", None))
        run: dict[type[Any], Callable[[Any], Any]] = {StormJob: node.storm, StepJob: node.step}
        while (job := await asyncio.to_thread(pipe.recv)) is not None:
            await run[type(job)](job)
            for task in background:
                if task.done():
                    task.result()  # a holder that lost its slot fails the run
            pipe.send(("done", recorder.found))
    finally:
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        await scheduler.disconnect()
