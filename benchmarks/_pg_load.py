"""Helpers of ``pg_bench``: the admitting worker processes and the SQL queue fill.

A worker is one OS process with its own ``PostgresScheduler.connect(...)`` (its own pool,
node id and tick loop), as one server process of a fleet would be. The parent starts
three of them with the ``spawn`` method, waits until every one is connected and warm,
and then gives them a common start time on the system-wide monotonic clock, so the
measured windows of the three processes coincide.

A worker drives its newcomers in one of two ways. Closed loop: ``tasks`` asyncio tasks,
each admitting a newcomer (and completing it when admitted) and then the next, so the
load adapts to the answers and, at saturation, the latency is the queueing of those
tasks. Open loop (an arrival pipe from the parent): newcomers arrive at a fixed offered rate with
exponentially distributed gaps from a seeded generator, each in a task of its own with
no cap on how many are in flight, and each is timed from its scheduled arrival, so a
stalled process or a slow database cannot hide latency by sending less. The arrivals
come from outside, as requests reach a server: the parent process sleeps until each
one's time and writes it to the worker's arrival pipe (:func:`send_arrivals`), and the
worker's event loop wakes on that pipe as it would on a socket.

The fill writes the rows a newcomer's ``admit`` writes (``INSERT_SESSION`` plus the
round-robin turn of ``ROUND_TAG``), for the downloads of ``core_bench.Workload``, with
``COPY``: admitting 65,536 sessions one by one would take minutes.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import math
import os
import random
import struct
import time
from collections import Counter, deque
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import asyncpg

from arkvory_sched import (
    Admitted,
    ByteRange,
    Decision,
    Delivered,
    DownloadRequest,
    DownloadScheduler,
    Queued,
    Rejected,
    SchedulerSettings,
    applied_class,
    default_class,
)
from arkvory_sched._session_keys import session_key
from arkvory_sched.postgres import PostgresScheduler
from arkvory_sched.postgres import _sql as sql
from benchmarks.core_bench import Workload

__all__ = [
    "CLAIM",
    "FILL_COLUMNS",
    "KINDS",
    "LoadResult",
    "LoadSpec",
    "answer_of",
    "arrival_schedule",
    "fill_waiting",
    "index_base",
    "newcomer_timed",
    "run_worker",
    "send_arrivals",
    "worker_slot",
]

ADMITTED = "admitted"  # newcomers on an empty queue: each gets a slot, then completes
QUEUED = "queued"  # newcomers behind a filled queue: each is answered Queued
CLAIM = "claim"  # the bare CLAIM_SLOT statement and RELEASE_SLOT, no scheduler
KINDS = (ADMITTED, QUEUED, CLAIM)

TICK_SECONDS = 0.5
POOL_SIZE = 8
WARM_ADMISSIONS = 20  # per task, before the ready signal (connections, statement cache)
PER_PROCESS = 10_000_000  # download indices per worker process
PER_TASK = 1_000_000  # download indices per task of a worker
FIRST_WORKER_SLOT = 10  # index slots 0-9 are the parent's (slot holders, traces)
SLOTS_PER_RUN = 4  # worker processes per run, at most
OPEN_CLAIM_ROWS = 64  # the floor's open loop: session rows per process (≥ its most in flight)
DRAIN_SECONDS = 15.0  # open loop: how long newcomers may still finish after the window
ARRIVAL = struct.Struct("=d")  # one arrival on the pipe: its scheduled time (monotonic)


def index_base(kind: str, process: int, task: int) -> int:
    """First download index of one task; every task of every phase has its own range."""
    return (1 + KINDS.index(kind)) * 100 * PER_PROCESS + process * PER_PROCESS + task * PER_TASK


def worker_slot(process: int, run_number: int) -> int:
    """The index slot (``index_base``'s ``process``) of one worker of one run.

    Runs that share a schema (the queue's closed and open loops) must not reuse download
    indices: a reused index is the same download, so its ``admit`` would be a poll of a
    waiting session instead of a newcomer.
    """
    slot = FIRST_WORKER_SLOT + SLOTS_PER_RUN * run_number + process
    if process >= SLOTS_PER_RUN or slot >= 100:
        raise ValueError(f"no download indices left for process {process} of run {run_number}")
    return slot


@dataclass(frozen=True, slots=True)
class LoadSpec:
    kind: str
    dsn: str
    schema: str
    settings: SchedulerSettings
    process: int
    tasks: int  # closed loop: newcomers in flight; open loop: 1 (the warm-up's)
    workload_size: int  # core_bench.Workload(workload_size): its principals and requests
    run_number: int = 0  # runs sharing a schema get distinct download indices


@dataclass(slots=True)
class LoadResult:
    process: int
    admit_ms: list[float] = field(default_factory=list)
    report_ms: list[float] = field(default_factory=list)
    answers: Counter[str] = field(default_factory=Counter)
    tick_ms: list[float] = field(default_factory=list)
    led: bool = False
    window: float = 0.0  # seconds the measured window lasted in this process
    cpu_seconds: float = 0.0  # this process's CPU time from the window's start to its end
    errors: list[str] = field(default_factory=list)
    # Open loop only. Latencies (admit_ms) run from each newcomer's scheduled arrival.
    lag_ms: list[float] = field(default_factory=list)  # scheduled arrival -> task running
    spans: list[tuple[float, float]] = field(default_factory=list)  # (scheduled, answered)
    offered: int = 0  # newcomers scheduled in the window
    completed: int = 0  # answers (any decision) returned in the window
    unfinished: int = 0  # admit still running DRAIN_SECONDS after the window: cancelled


# ====================================================================== worker process
def run_worker(spec: LoadSpec, pipe: Connection, arrivals: Connection | None = None) -> None:
    """Process entry point: connect, warm up, say ready, run the window, send results.

    ``arrivals`` (open loop) is the read end of the pipe the parent writes each
    newcomer's scheduled arrival to, as :func:`send_arrivals` does."""
    try:
        result = asyncio.run(_worker(spec, pipe, arrivals))
    except BaseException as error:  # report instead of leaving the parent waiting
        result = LoadResult(spec.process, errors=[f"{type(error).__name__}: {error}"])
        pipe.send(("ready", None))
    pipe.send(("result", result))
    pipe.close()


async def _worker(spec: LoadSpec, pipe: Connection, arrivals: Connection | None) -> LoadResult:
    result = LoadResult(spec.process)
    if spec.kind == CLAIM:
        return await _claim_worker(spec, pipe, result, arrivals)
    scheduler = await PostgresScheduler.connect(
        spec.dsn,
        schema=spec.schema,
        settings=spec.settings,
        node_id=f"bench-{os.getpid()}-{spec.process}",
        pool_size=POOL_SIZE,
    )
    workload = Workload(spec.workload_size)
    stop = asyncio.Event()
    ticker = asyncio.create_task(_tick_loop(scheduler, stop, result))
    try:
        slot = worker_slot(spec.process, spec.run_number)
        counters = [index_base(spec.kind, slot, task) for task in range(spec.tasks)]
        # Warm-up: connections open, statements prepared, the code paths run once.
        for _ in range(WARM_ADMISSIONS):
            await asyncio.gather(
                *(
                    _admit_one(scheduler, workload, spec.kind, counters, task, None)
                    for task in range(spec.tasks)
                )
            )
        start, end = await _handshake(pipe)
        marker = asyncio.create_task(_cpu_at(start))
        if arrivals is not None:

            def launch(scheduled: float) -> Coroutine[Any, Any, None]:
                request = workload.request(counters[0])
                counters[0] += 1
                return _open_arrival(scheduler, request, scheduled, (start, end), result)

            closing = asyncio.create_task(_cpu_at(end))
            await _open_loop(launch, arrivals, (start, end), result)
            result.cpu_seconds = await closing - await marker
        else:
            await asyncio.gather(
                *(
                    _admit_loop(scheduler, workload, spec.kind, counters, task, start, end, result)
                    for task in range(spec.tasks)
                )
            )
            result.cpu_seconds = time.process_time() - await marker
        result.window = end - start
        result.led = result.led or scheduler.is_leader
    finally:
        stop.set()
        await ticker
        await scheduler.disconnect()
    return result


async def _handshake(pipe: Connection) -> tuple[float, float]:
    """Tell the parent this process is ready, wait for the common start (``go``: load
    runs from then, warm-up first) and return the measured window (monotonic)."""
    pipe.send(("ready", None))
    _, go, start, end = await asyncio.to_thread(pipe.recv)
    delay = go - time.monotonic()
    if delay > 0:
        await asyncio.sleep(delay)
    return float(start), float(end)


async def _cpu_at(moment: float) -> float:
    """This process's CPU time at ``moment`` (monotonic)."""
    await asyncio.sleep(max(0.0, moment - time.monotonic()))
    return time.process_time()


async def _tick_loop(scheduler: PostgresScheduler, stop: asyncio.Event, result: LoadResult) -> None:
    """The tick every process runs (as the middleware's lifespan does), timed."""
    while not stop.is_set():
        started = time.perf_counter()
        report = await scheduler.tick()
        result.tick_ms.append(1000 * (time.perf_counter() - started))
        result.led = result.led or scheduler.is_leader
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), report.next_tick_in)


async def _admit_loop(
    scheduler: PostgresScheduler,
    workload: Workload,
    kind: str,
    counters: list[int],
    task: int,
    start: float,
    end: float,
    result: LoadResult,
) -> None:
    while (now := time.monotonic()) < end:
        await _admit_one(
            scheduler, workload, kind, counters, task, result if now >= start else None
        )


async def _admit_one(
    scheduler: PostgresScheduler,
    workload: Workload,
    kind: str,
    counters: list[int],
    task: int,
    result: LoadResult | None,
) -> None:
    """One newcomer of this task's own, timed by :func:`newcomer_timed`."""
    index = counters[task]
    counters[task] += 1
    decision, admit_ms, report_ms = await newcomer_timed(scheduler, workload.request(index))
    if result is not None:
        result.answers[answer_of(decision)] += 1
        result.admit_ms.append(admit_ms)
        if report_ms is not None:
            result.report_ms.append(report_ms)


async def newcomer_timed(
    scheduler: DownloadScheduler, request: DownloadRequest
) -> tuple[Decision, float, float | None]:
    """``admit`` timed; when admitted, the whole object reported at once, timed.

    Returns the decision and the milliseconds of ``admit`` and of ``report`` (``None``
    when nothing was admitted), the same for either implementation.
    """
    started = time.perf_counter()
    decision = await scheduler.admit(request)
    admitted = time.perf_counter()
    if not isinstance(decision, Admitted):
        return decision, 1000 * (admitted - started), None
    await scheduler.report(decision.grant, Delivered(ByteRange(0, request.object_size)))
    return decision, 1000 * (admitted - started), 1000 * (time.perf_counter() - admitted)


def answer_of(decision: Decision) -> str:
    if isinstance(decision, Admitted):
        return "admitted"
    if isinstance(decision, Queued):
        return "queued"
    assert isinstance(decision, Rejected)
    return f"rejected: {decision.reason.value}"


# ====================================================================== open loop
def arrival_schedule(
    seed: int, kind: str, process: int, rate: float, go: float, end: float
) -> list[float]:
    """The scheduled arrivals (monotonic) of one process's newcomers from ``go`` until
    ``end``: exponentially distributed gaps at ``rate`` per second (a Poisson process),
    seeded per seed, workload and process, so a run can be repeated."""
    rng = random.Random(f"{seed}:{kind}:{process}")
    arrivals = []
    scheduled = go + rng.expovariate(rate)
    while scheduled < end:
        arrivals.append(scheduled)
        scheduled += rng.expovariate(rate)
    return arrivals


def send_arrivals(schedules: list[list[float]], pipes: list[Connection]) -> None:
    """Write each arrival to its process's pipe at its scheduled time, then close them.

    Runs in the parent (a thread of it), outside the measured processes, as clients are
    outside a server: a worker learns of a newcomer when its event loop sees the pipe
    readable, the way it would see a request on a socket, and spends nothing waiting for
    it. ``time.sleep`` wakes within tens of microseconds of its target; a late wake is
    counted against the scheduler, since latency runs from the scheduled time.
    """
    merged = heapq.merge(
        *([(moment, index) for moment in schedule] for index, schedule in enumerate(schedules))
    )
    descriptors = [pipe.fileno() for pipe in pipes]
    try:
        for moment, index in merged:
            delay = moment - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            os.write(descriptors[index], ARRIVAL.pack(moment))
    finally:
        for pipe in pipes:
            pipe.close()


async def _open_loop(
    launch: Callable[[float], Coroutine[Any, Any, None]],
    arrivals: Connection,
    window: tuple[float, float],
    result: LoadResult,
) -> None:
    """Start ``launch(scheduled)`` for each arrival the parent writes, until it closes
    the pipe.

    The arrival times are fixed in advance by the seeded exponential gaps, not by the
    answers: when the process falls behind, the overdue newcomers start as soon as its
    loop reads them and their lateness counts in their latency. Each runs in a task of
    its own; in-flight newcomers beyond the pool's connections wait for one, which is
    part of their latency too. After the last arrival, the newcomers still running get
    ``DRAIN_SECONDS`` to finish; the rest are cancelled and counted as unfinished, their
    latency so far recorded (a lower bound).
    """
    start, end = window
    loop = asyncio.get_running_loop()
    closed: asyncio.Future[None] = loop.create_future()
    pending: set[asyncio.Task[None]] = set()
    unread = bytearray()
    descriptor = arrivals.fileno()

    def on_readable() -> None:
        data = os.read(descriptor, 64 * 1024)
        if not data:
            loop.remove_reader(descriptor)
            closed.set_result(None)
            return
        unread.extend(data)
        whole = len(unread) - len(unread) % ARRIVAL.size
        for (scheduled,) in ARRIVAL.iter_unpack(bytes(unread[:whole])):
            result.offered += start <= scheduled
            task = asyncio.create_task(launch(scheduled))
            pending.add(task)
            task.add_done_callback(pending.discard)
        del unread[:whole]

    loop.add_reader(descriptor, on_readable)
    try:
        await closed
    finally:
        loop.remove_reader(descriptor)
    if pending:
        _, late = await asyncio.wait(
            set(pending), timeout=max(0.0, end + DRAIN_SECONDS - time.monotonic())
        )
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)


async def _open_arrival(
    scheduler: PostgresScheduler,
    request: DownloadRequest,
    scheduled: float,
    window: tuple[float, float],
    result: LoadResult,
) -> None:
    """One open-loop newcomer: ``admit`` timed from ``scheduled``; when admitted, the
    whole object reported (timed from the answer). A failed ``admit`` (such as the
    pool's 2 s acquire timeout) is an answer of its own in ``answers``, timed as well."""
    start, end = window
    measured = scheduled >= start
    launched = time.monotonic()
    decision: Decision | None = None
    try:
        decision = await scheduler.admit(request)
        answer = answer_of(decision)
    except asyncio.CancelledError:
        result.spans.append((scheduled, time.monotonic()))
        if measured:
            result.unfinished += 1
            result.answers["unfinished (cancelled)"] += 1
            result.admit_ms.append(1000 * (time.monotonic() - scheduled))
            result.lag_ms.append(1000 * (launched - scheduled))
        raise
    except Exception as error:
        answer = f"failed: {type(error).__name__}"
    answered = time.monotonic()
    result.spans.append((scheduled, answered))
    if decision is not None and start <= answered < end:
        result.completed += 1
    if measured:
        result.answers[answer] += 1
        result.admit_ms.append(1000 * (answered - scheduled))
        result.lag_ms.append(1000 * (launched - scheduled))
    if isinstance(decision, Admitted):
        try:
            await scheduler.report(decision.grant, Delivered(ByteRange(0, request.object_size)))
        except Exception as error:
            result.answers[f"report failed: {type(error).__name__}"] += measured
            return
        if measured:
            result.report_ms.append(1000 * (time.monotonic() - answered))


# ====================================================================== the bare claim
async def _claim_worker(
    spec: LoadSpec, pipe: Connection, result: LoadResult, arrivals: Connection | None
) -> LoadResult:
    """The floor: ``CLAIM_SLOT`` then ``RELEASE_SLOT`` on a session row of its own, each
    statement in autocommit, on connections taken from a queue (no pool: asyncpg's
    costs more CPU than the two statements on Python 3.11, see ADR 0012).

    Closed loop: one session row and one connection per task. Open loop: the arrivals
    the parent writes, each on a session row taken from a free list (a row claims one
    slot at a time), on as many connections as the scheduler's pool.
    """
    size = POOL_SIZE if arrivals is not None else spec.tasks
    opened: list[asyncpg.Connection] = []
    idle: asyncio.Queue[asyncpg.Connection] = asyncio.Queue()
    try:
        for _ in range(size):
            opened.append(
                await asyncpg.connect(spec.dsn, server_settings={"search_path": spec.schema})
            )
            idle.put_nowait(opened[-1])
        slot = worker_slot(spec.process, spec.run_number)
        rows = OPEN_CLAIM_ROWS if arrivals is not None else spec.tasks
        first = index_base(CLAIM, slot, 0)
        keys = [(first + row).to_bytes(16, "big") for row in range(rows)]
        setup = opened[0]
        await setup.execute(sql.ENSURE_SLOTS, spec.settings.sessions)
        now = time.time()
        for key in keys:
            await setup.execute(
                sql.INSERT_SESSION,
                key,
                f"claim-{spec.process}",
                1,
                True,
                1 << 30,
                now,
                int(now * 1000),
                1.0,
                now,
                None,
                now,
                now + 3600,
            )
        node = f"bench-claim-{os.getpid()}"

        async def claim_and_release(key: bytes) -> tuple[str, float, float]:
            """The answer and the moments (monotonic) of the claim and the release."""
            conn = await idle.get()
            try:
                row = await conn.fetchrow(
                    sql.CLAIM_SLOT,
                    key,
                    spec.settings.sessions,
                    True,
                    spec.settings.reserve,
                    node,
                    10.0,
                    time.time(),
                )
                claimed = time.monotonic()
                if row is None:
                    return "no free slot", claimed, claimed
                await conn.execute(sql.RELEASE_SLOT, row["slot_no"], row["lease_token"], key)
                return "claimed", claimed, time.monotonic()
            finally:
                idle.put_nowait(conn)

        async def cycle(key: bytes, measured: bool) -> None:
            started = time.monotonic()
            answer, claimed, released = await claim_and_release(key)
            if measured:
                result.answers[answer] += 1
                if answer == "claimed":
                    result.admit_ms.append(1000 * (claimed - started))
                    result.report_ms.append(1000 * (released - claimed))

        for _ in range(WARM_ADMISSIONS):
            await asyncio.gather(*(cycle(key, False) for key in keys))
        start, end = await _handshake(pipe)
        marker = asyncio.create_task(_cpu_at(start))
        if arrivals is not None:
            free = deque(keys)

            async def arrival(scheduled: float) -> None:
                launched = time.monotonic()
                measured = scheduled >= start
                if not free:
                    result.answers["no free session row"] += measured
                    return
                key = free.popleft()
                try:
                    answer, claimed, released = await claim_and_release(key)
                finally:
                    free.append(key)
                result.spans.append((scheduled, claimed))
                result.completed += start <= claimed < end
                if measured:
                    result.answers[answer] += 1
                    result.admit_ms.append(1000 * (claimed - scheduled))
                    result.lag_ms.append(1000 * (launched - scheduled))
                    result.report_ms.append(1000 * (released - claimed))

            closing = asyncio.create_task(_cpu_at(end))
            await _open_loop(arrival, arrivals, (start, end), result)
            result.cpu_seconds = await closing - await marker
            result.window = end - start
            return result

        async def loop(key: bytes) -> None:
            while (now := time.monotonic()) < end:
                await cycle(key, now >= start)

        await asyncio.gather(*(loop(key) for key in keys))
        result.cpu_seconds = time.process_time() - await marker
        result.window = end - start
    finally:
        for connection in opened:
            await connection.close()
    return result


# ====================================================================== queue fill
FILL_COLUMNS = (  # the columns of fill_rows' rows, in order
    "session_key",
    "principal",
    "base_class",
    "queue_rank",
    "has_id",
    "object_size",
    "state",
    "arrival",
    "arrival_wall_ms",
    "order_key",
    "aging_since",
    "promote_at",
    "waiting_since",
    "check_at",
    "no_show_at",
    "first_estimate",
    "last_activity",
)
ARRIVAL_SPREAD = 300.0  # arrivals spread over the last check period, as in core_bench
CHECK_PERIOD = 300.0  # far-back waiters are told to come back after 300 s


def fill_rows(
    workload: Workload, indices: Iterable[int], now: float, aging_seconds: float
) -> tuple[list[tuple[Any, ...]], dict[tuple[int, str], int]]:
    """Rows for ``download_session`` and the principals' round-robin turns.

    Each row is what a newcomer's ``admit`` writes (``INSERT_SESSION`` with the tag of
    ``ROUND_TAG``: a principal's k-th waiter in a class gets turn k of the current round)
    after the waiter polled once: ``check_at`` as ``RECORD_CHECK`` writes it for a client
    told to come back in 300 s, polls spread evenly over the last 300 s.
    """
    rows: list[tuple[Any, ...]] = []
    turns: dict[tuple[int, str], int] = {}
    indices = list(indices)
    count = max(1, len(indices))
    for position, index in enumerate(indices):
        request = workload.request(index)
        rank = applied_class(default_class(request.principal_kind), request.requested_class).rank
        turn = (rank, request.principal)
        tag = turns.get(turn, 0) + 1
        turns[turn] = tag
        arrival = now - ARRIVAL_SPREAD + ARRIVAL_SPREAD * position / count
        key = session_key(
            request.principal, request.object_id, request.download_id, request.client_address
        )
        polled = now - CHECK_PERIOD * ((position * 0.618_033_988_75) % 1.0)
        polled = max(polled, arrival)
        check_at = polled + CHECK_PERIOD
        promote_at = arrival + aging_seconds if rank > 1 and aging_seconds > 0 else None
        rows.append(
            (
                key,
                request.principal,
                rank,
                rank,
                True,
                request.object_size,
                0,
                arrival,
                math.floor(arrival * 1000),
                float(tag),
                arrival,
                promote_at,
                arrival,
                check_at,
                check_at + CHECK_PERIOD,
                now + CHECK_PERIOD,
                polled,
            )
        )
    return rows, turns


async def fill_waiting(
    conn: asyncpg.Connection,
    workload: Workload,
    indices: Iterable[int],
    now: float,
    settings: SchedulerSettings,
) -> int:
    """Write waiting sessions for ``indices`` with ``COPY``; VACUUM ANALYZE afterwards
    (what autovacuum does soon after a bulk insert). Returns the number written."""
    rows, turns = fill_rows(workload, indices, now, settings.aging_minutes * 60.0)
    async with conn.transaction():
        virtual = {
            row["queue_rank"]: row["virtual_time"]
            for row in await conn.fetch("SELECT queue_rank, virtual_time FROM class_state")
        }
        if any(virtual.values()):
            rows = [(*row[:9], row[9] + virtual.get(row[3], 0), *row[10:]) for row in rows]
        await conn.copy_records_to_table(
            "download_session", records=rows, columns=list(FILL_COLUMNS)
        )
        await conn.executemany(
            "INSERT INTO principal_round AS p (queue_rank, principal, last_tag) "
            "VALUES ($1, $2, $3) ON CONFLICT (queue_rank, principal) DO UPDATE "
            "SET last_tag = greatest(p.last_tag, excluded.last_tag)",
            [(rank, who, virtual.get(rank, 0) + tag) for (rank, who), tag in turns.items()],
        )
    # What autovacuum does soon after a bulk insert, for every table of the queue.
    await conn.execute(
        "VACUUM (ANALYZE) download_session, principal_round, download_slot, class_state, "
        "queue_state, fleet_node, queue_leader"
    )
    return len(rows)
