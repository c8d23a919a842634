"""Benchmark of ``PostgresScheduler`` side by side with ``InMemoryDownloadScheduler``.

Run with ``python -m benchmarks.pg_bench`` (or ``make bench-pg``); ``--help`` lists the
options and ``benchmarks/README.md`` explains the workloads and every figure. Needs a
PostgreSQL server (``$ARKVORY_TEST_DATABASE_URL``, default
``postgresql://postgres@127.0.0.1:5432/test``); every phase works in a throwaway schema
of its own that is dropped at the end of the phase, however it ends.

1. New-session admission from three OS processes sharing one schema, each with its own
   ``PostgresScheduler.connect(...)`` and tick loop: newcomers on an empty queue (each
   answered ``Admitted`` and completed at once) and newcomers behind 65,536 waiting
   sessions (each answered ``Queued``), in a closed loop at 1 and 4 admissions in flight
   per process and in an open loop at fixed offered rates (seeded Poisson arrivals,
   latency from each newcomer's scheduled arrival); the bare ``CLAIM_SLOT`` statement as
   the floor; the in-memory scheduler's admission of the same requests in this process.
2. Range admission of an active session (the lease-cache path): ``admit`` alone and
   ``admit`` + ``report`` apart, against the in-memory scheduler.
3. The leader's ``tick()`` at 65,536 waiting sessions against the in-memory ``tick()``.
4. A traced, sequential pass that counts the statements of each kind of call.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import itertools
import math
import multiprocessing
import os
import platform
import secrets
import shlex
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Final, TypeVar

import asyncpg

from arkvory_sched import (
    Admitted,
    ByteRange,
    Delivered,
    DownloadClass,
    DownloadRequest,
    DownloadScheduler,
    InMemoryDownloadScheduler,
    PrincipalKind,
    Queued,
    SchedulerSettings,
    applied_class,
    default_class,
    generate_key,
)
from arkvory_sched.postgres import PostgresScheduler, apply_migrations, validate_schema
from arkvory_sched.testing import FakeClock
from benchmarks._machine import cpu_count, cpu_model, load_average, median
from benchmarks._pg_load import (
    ADMITTED,
    CLAIM,
    DRAIN_SECONDS,
    FIRST_WORKER_SLOT,
    POOL_SIZE,
    QUEUED,
    SLOTS_PER_RUN,
    LoadResult,
    LoadSpec,
    answer_of,
    arrival_schedule,
    fill_waiting,
    index_base,
    newcomer_timed,
    run_worker,
    send_arrivals,
)
from benchmarks._pg_trace import Breakdown, StatementTrace
from benchmarks._report import format_ms as _ms
from benchmarks._report import format_ratio as _ratio
from benchmarks._report import format_us as _us
from benchmarks._report import package_version, verdict, write_section
from benchmarks.core_bench import Workload, quantile

__all__ = ["main"]

KIB: Final = 1024
MIB: Final = 1024 * KIB
GIB: Final = 1024 * MIB
T = TypeVar("T")

DEFAULT_DSN: Final = "postgresql://postgres@127.0.0.1:5432/test"
DSN_VARIABLE: Final = "ARKVORY_TEST_DATABASE_URL"
RESULTS_PATH: Final = Path(__file__).resolve().parent / "RESULTS.md"
SECTION_HEADING: Final = "## PostgreSQL"

PROCESSES: Final = 3
LEVELS: Final = (1, 4)  # closed loop: admissions in flight per process
RATES: Final = (150.0, 300.0)  # open loop: newcomers per second, all processes together
SEED: Final = 1  # open loop: seed of the arrival gaps
RATE_KEPT: Final = 0.95  # open loop: answers in the window ÷ newcomers scheduled in it
MAX_RUNS: Final = (100 - FIRST_WORKER_SLOT) // SLOTS_PER_RUN  # runs sharing one schema
READY_TIMEOUT_S: Final = 60.0
WARMUP_S: Final = 1.0
DURATION_S: Final = 6.0
QUICK_DURATION_S: Final = 2.0
PHASE_TIMEOUT_S: Final = 300.0
DROP_RETRY_S: Final = 60.0

WAITING: Final = 65_536
QUEUE_LIMIT: Final = 1_048_576
ADMIT_SESSIONS: Final = 64  # slots while newcomers on an empty queue are admitted
TICK_SESSIONS: Final = 16  # slots of the 65,536 queue (as core_bench)
FREE_SLOTS: Final = 2  # slots left free, so that each tick marks waiters for them
MEMORY_NEWCOMERS: Final = 20_000
QUICK_MEMORY_NEWCOMERS: Final = 5_000

RANGES_IN_FLIGHT: Final = 16  # pattern A: ranges admitted back to back (ranges_per_session)
RANGE_BATCHES: Final = 100
RANGE_PAIRS: Final = 1_000  # pattern B: admit + report, one range at a time
RANGE_ROUNDS: Final = 5  # the range patterns alternate between the schedulers this often
QUICK_RANGE_BATCHES: Final = 30
QUICK_RANGE_PAIRS: Final = 300
RANGE_BYTES: Final = 1 * MIB
RANGE_OBJECT: Final = 64 * GIB

WARMUP_TICKS: Final = 4
TICKS: Final = 20
QUICK_TICKS: Final = 8
TICK_INTERVAL_S: Final = 0.5
TRACED_CALLS: Final = 100
TRACED_TICKS: Final = 5

ADMISSION_P99_TARGET_MS: Final = 5.0
RANGE_RATIO_TARGET: Final = 2.0
TICK_TARGET_MS: Final = 100.0
CLAIM_REFERENCE = "~6,000/s at p99 < 3 ms"


def settings_for(sessions: int) -> SchedulerSettings:
    return SchedulerSettings(sessions=sessions, queue_limit=QUEUE_LIMIT, queue_per_principal=4_096)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run_async(coroutine: Coroutine[Any, Any, T], timeout: float = PHASE_TIMEOUT_S) -> T:
    """``asyncio.run`` with a bound: a phase that hangs fails the run (and its schema is
    still dropped) instead of holding the machine."""
    return asyncio.run(asyncio.wait_for(coroutine, timeout))


# ====================================================================== results
def _rate(value: float) -> str:
    return f"{value:,g}"


@dataclass(frozen=True, slots=True)
class Load:
    """How the worker processes drive their newcomers: ``tasks`` in flight per process
    (closed loop), or ``rate`` newcomers per second offered by all of them together
    (open loop; ``tasks`` is then the warm-up's 1)."""

    tasks: int = 1
    rate: float = 0.0

    @property
    def open(self) -> bool:
        return self.rate > 0

    @property
    def phase(self) -> str:
        return f"{_rate(self.rate)}/s open loop" if self.open else f"× {self.tasks}"


@dataclass(slots=True)
class Admission:
    """One admission workload: PostgreSQL from several processes, or in memory."""

    label: str
    implementation: str
    in_flight: int = 1
    processes: int = 1
    rate: float = 0.0  # open loop: offered newcomers per second, all processes; 0 = closed
    admit_ms: list[float] = field(default_factory=list)
    report_ms: list[float] = field(default_factory=list)
    answers: Counter[str] = field(default_factory=Counter)
    window: float = 0.0
    cpu_seconds: float = 0.0
    machine_busy: float = math.nan
    leader_tick_ms: list[float] = field(default_factory=list)
    ticks: int = 0
    leaders: int = 0
    errors: list[str] = field(default_factory=list)
    waiting_before: int = 0
    waiting_after: int = 0
    # Open loop only: admit_ms runs from each newcomer's scheduled arrival.
    lag_ms: list[float] = field(default_factory=list)  # scheduled arrival -> task running
    offered: int = 0  # newcomers scheduled in the window
    completed: int = 0  # answers returned in the window
    unfinished: int = 0  # cancelled DRAIN_SECONDS after the window
    most_in_flight: int = 0  # newcomers scheduled and not yet answered, all processes
    mean_in_flight: float = math.nan

    @property
    def open_loop(self) -> bool:
        return self.rate > 0

    @property
    def load(self) -> str:
        if self.open_loop:
            return f"{self.processes} processes, {_rate(self.rate)}/s offered (open loop)"
        return f"{self.processes} × {self.in_flight}"

    @property
    def throughput(self) -> float:
        """Closed loop: measured ``admit`` calls per second; open loop: answers returned
        in the window per second (the achieved rate)."""
        if not self.window:
            return math.nan
        return (self.completed if self.open_loop else len(self.admit_ms)) / self.window

    @property
    def scheduled_rate(self) -> float:
        return self.offered / self.window if self.window else math.nan

    @property
    def rate_kept(self) -> bool:
        return self.completed >= RATE_KEPT * self.offered

    @property
    def cpu_per_admission_ms(self) -> float:
        count = self.completed if self.open_loop else len(self.admit_ms)
        return 1000 * self.cpu_seconds / count if count else math.nan

    @property
    def mean_turn_ms(self) -> float:
        """Mean ``admit`` plus, when admitted, its completing ``report``: one task's turn."""
        if not self.admit_ms:
            return math.nan
        return (sum(self.admit_ms) + sum(self.report_ms)) / len(self.admit_ms)

    @property
    def p50(self) -> float:
        return median(self.admit_ms)

    @property
    def p99(self) -> float:
        return quantile(self.admit_ms, 0.99)

    @property
    def max_ms(self) -> float:
        return max(self.admit_ms, default=math.nan)


@dataclass(slots=True)
class RangeResult:
    label: str
    batch_admit_us: list[float] = field(default_factory=list)  # pattern A
    admit_us: list[float] = field(default_factory=list)  # pattern B
    report_us: list[float] = field(default_factory=list)
    pair_us: list[float] = field(default_factory=list)
    database_admits: int = 0


@dataclass(slots=True)
class TickResult:
    label: str
    tick_ms: list[float] = field(default_factory=list)
    first_ms: float = math.nan
    waiting: list[int] = field(default_factory=list)
    fill_seconds: float = 0.0
    marked: int = 0
    expired: int = 0


@dataclass(slots=True)
class Run:
    admissions: list[Admission] = field(default_factory=list)
    ranges: dict[str, RangeResult] = field(default_factory=dict)
    ticks: dict[str, TickResult] = field(default_factory=dict)
    traces: dict[str, Breakdown] = field(default_factory=dict)
    server_version: str = "unknown"
    server_settings: dict[str, str] = field(default_factory=dict)
    phases: list[tuple[str, float]] = field(default_factory=list)
    seed: int | None = None  # open loop: the seed of the arrival gaps (None: no open loop)

    def admission(
        self, implementation: str, label: str, in_flight: int, rate: float = 0.0
    ) -> Admission | None:
        return next(
            (
                a
                for a in self.admissions
                if a.implementation == implementation
                and a.label == label
                and a.in_flight == in_flight
                and a.rate == rate
            ),
            None,
        )


@contextlib.contextmanager
def phase(run: Run, name: str) -> Iterator[None]:
    log(f"{name} …")
    started = time.perf_counter()
    try:
        yield
    finally:
        run.phases.append((name, time.perf_counter() - started))


# ====================================================================== schemas
@contextlib.contextmanager
def throwaway_schema(dsn: str, label: str) -> Iterator[str]:
    """A migrated schema of this run, dropped however the block ends."""
    name = validate_schema(f"arkvory_bench_{label}_{secrets.token_hex(4)}")
    try:
        run_async(apply_migrations(dsn, schema=name), 60)
        yield name
    finally:
        run_async(_drop_schema(dsn, name), DROP_RETRY_S + 30)


async def _drop_schema(dsn: str, name: str) -> None:
    """Drop the schema; while the server restarts (or refuses connections), retry for up
    to a minute, so that a run that failed because of a restart still cleans up."""
    deadline = time.monotonic() + DROP_RETRY_S
    while True:
        try:
            connection = await asyncpg.connect(dsn, timeout=10)
            try:
                await connection.execute(f'DROP SCHEMA IF EXISTS "{validate_schema(name)}" CASCADE')
            finally:
                await connection.close()
            return
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as error:
            if time.monotonic() > deadline:
                log(f"could not drop schema {name}: {error}; drop it by hand")
                raise
            await asyncio.sleep(1.0)


async def _connect(dsn: str, schema: str) -> asyncpg.Connection:
    return await asyncpg.connect(dsn, server_settings={"search_path": schema})


async def _count_waiting(dsn: str, schema: str) -> int:
    connection = await _connect(dsn, schema)
    try:
        return int(
            await connection.fetchval("SELECT count(*) FROM download_session WHERE state = 0")
        )
    finally:
        await connection.close()


# ====================================================================== processes
def _cpu_times() -> tuple[int, int] | None:
    """(busy, total) jiffies of the whole machine, from /proc/stat."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            values = [int(part) for part in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return sum(values) - idle, sum(values)


def _sleep_until(moment: float) -> None:
    time.sleep(max(0.0, moment - time.monotonic()))


def run_processes(
    kind: str,
    dsn: str,
    schema: str,
    settings: SchedulerSettings,
    *,
    load: Load,
    warmup: float,
    duration: float,
    seed: int = SEED,
    run_number: int = 0,
) -> tuple[list[LoadResult], float, tuple[float, float]]:
    """Start the workers, line up their windows, collect their results; also return
    the machine's CPU use (all processes, not only these) during the window and the
    window itself (system-wide monotonic clock).

    Open loop: each process offers a third of ``load.rate``. ``run_number`` gives the
    runs that share a schema download indices of their own."""
    context = multiprocessing.get_context("spawn")
    pipes = []
    arrival_pipes: list[Connection] = []
    workers = []
    try:
        for process in range(PROCESSES):
            parent, child = context.Pipe()
            arrivals_out, arrivals_in = context.Pipe(duplex=False) if load.open else (None, None)
            spec = LoadSpec(
                kind,
                dsn,
                schema,
                settings,
                process,
                1 if load.open else load.tasks,
                WAITING,
                run_number=run_number,
            )
            worker = context.Process(
                target=run_worker, args=(spec, child, arrivals_out), daemon=True
            )
            worker.start()
            child.close()
            pipes.append(parent)
            workers.append(worker)
            if arrivals_out is not None and arrivals_in is not None:
                arrivals_out.close()
                arrival_pipes.append(arrivals_in)
        for pipe, worker in zip(pipes, workers, strict=True):
            receive(pipe, worker, READY_TIMEOUT_S)
        go = time.monotonic() + 0.2
        start = go + warmup
        end = start + duration
        for pipe in pipes:
            pipe.send(("go", go, start, end))
        arrivals = None
        if load.open:
            # The floor replays the draw of the newcomers on an empty queue, so that both
            # meet the same bursts.
            draw = ADMITTED if kind == CLAIM else kind
            schedules = [
                arrival_schedule(seed, draw, process, load.rate / PROCESSES, go, end)
                for process in range(PROCESSES)
            ]
            arrivals = threading.Thread(
                target=send_arrivals, args=(schedules, arrival_pipes), daemon=True
            )
            arrivals.start()
        _sleep_until(start)
        before = _cpu_times()
        _sleep_until(end)
        after = _cpu_times()
        busy = math.nan
        if before is not None and after is not None and after[1] > before[1]:
            busy = (after[0] - before[0]) / (after[1] - before[1])
        if arrivals is not None:
            arrivals.join()
        results = []
        for pipe, worker in zip(pipes, workers, strict=True):
            _, result = receive(pipe, worker, READY_TIMEOUT_S)
            results.append(result)
        for worker in workers:
            worker.join(30)
        return results, busy, (start, end)
    finally:
        for pipe in arrival_pipes:
            pipe.close()
        for worker in workers:
            if worker.is_alive():
                worker.kill()
                worker.join(5)


def receive(pipe: Any, worker: Any, timeout: float) -> Any:
    """The next message of a worker; fails at once when the worker died."""
    deadline = time.monotonic() + timeout
    while not pipe.poll(0.2):
        if not worker.is_alive() and not pipe.poll(0):
            raise RuntimeError(f"worker process {worker.pid} exited ({worker.exitcode})")
        if time.monotonic() > deadline:
            raise RuntimeError(f"worker process {worker.pid} did not answer in {timeout:.0f} s")
    return pipe.recv()


def in_flight(spans: Sequence[tuple[float, float]], start: float, end: float) -> tuple[int, float]:
    """The most and the mean (over time) of the spans open at once in [start, end)."""
    events = sorted([(begun, 1) for begun, _ in spans] + [(answered, -1) for _, answered in spans])
    count = most = 0
    area = 0.0
    last = start
    for moment, step in events:  # at equal moments, an answer before an arrival
        if moment >= end:
            break
        if moment > last:
            area += count * (moment - last)
            last = moment
        if moment >= start:
            most = max(most, count)
        count += step
        if moment >= start:
            most = max(most, count)
    area += count * (end - last)
    most = max(most, count)
    return most, area / (end - start) if end > start else math.nan


def postgres_admissions(
    label: str,
    kind: str,
    dsn: str,
    schema: str,
    settings: SchedulerSettings,
    load: Load,
    duration: float,
    *,
    seed: int = SEED,
    run_number: int = 0,
) -> Admission:
    results, busy, (start, end) = run_processes(
        kind,
        dsn,
        schema,
        settings,
        load=load,
        warmup=WARMUP_S,
        duration=duration,
        seed=seed,
        run_number=run_number,
    )
    merged = Admission(
        label,
        "PostgreSQL",
        in_flight=1 if load.open else load.tasks,
        processes=len(results),
        rate=load.rate,
    )
    merged.machine_busy = busy
    spans: list[tuple[float, float]] = []
    for result in results:
        merged.admit_ms += result.admit_ms
        merged.report_ms += result.report_ms
        merged.answers.update(result.answers)
        merged.cpu_seconds += result.cpu_seconds
        merged.lag_ms += result.lag_ms
        spans += result.spans
        merged.offered += result.offered
        merged.completed += result.completed
        merged.unfinished += result.unfinished
        merged.ticks += len(result.tick_ms)
        if result.led:
            merged.leaders += 1
            merged.leader_tick_ms += result.tick_ms
        merged.errors += result.errors
    if merged.errors:
        raise RuntimeError(f"{label}: worker errors: {merged.errors}")
    merged.window = max((result.window for result in results), default=0.0)
    if load.open:
        merged.most_in_flight, merged.mean_in_flight = in_flight(spans, start, end)
    return merged


# ====================================================================== requests
def _next_range(request: DownloadRequest, start: int, length: int) -> DownloadRequest:
    return DownloadRequest(
        principal=request.principal,
        principal_kind=request.principal_kind,
        object_id=request.object_id,
        object_size=request.object_size,
        byte_range=ByteRange(start, min(request.object_size, start + length)),
        download_id=request.download_id,
        requested_class=request.requested_class,
    )


def slot_holders(workload: Workload) -> list[DownloadRequest]:
    """The downloads that hold the slots of the 65,536 queue (first ranges): one
    interactive for the reserved slot, admitted last, and the rest of other classes."""
    interactive: list[DownloadRequest] = []
    others: list[DownloadRequest] = []
    index = index_base(QUEUED, 9, 0)
    while not interactive or len(others) < TICK_SESSIONS - 1:
        request = workload.request(index)
        index += 1
        cls = applied_class(default_class(request.principal_kind), request.requested_class)
        if cls is DownloadClass.INTERACTIVE:
            interactive = interactive or [request]
        elif len(others) < TICK_SESSIONS - 1:
            others.append(request)
    return others + interactive


Holders = dict[int, tuple[DownloadRequest, int]]


async def start_holders(scheduler: DownloadScheduler, workload: Workload) -> Holders:
    """Admit the slot holders on the empty queue; each delivers its first range."""
    holders: Holders = {}
    for request in slot_holders(workload):
        decision = await scheduler.admit(request)
        assert isinstance(decision, Admitted), decision
        assert request.byte_range is not None
        await scheduler.report(decision.grant, Delivered(request.byte_range))
        holders[len(holders)] = (request, request.byte_range.end)
    return holders


async def finish_holders(scheduler: DownloadScheduler, holders: Holders, count: int) -> None:
    """Complete ``count`` holders: their slots are free for the tick to mark waiters."""
    for slot in range(count):
        request, offset = holders.pop(slot)
        rest = _next_range(request, offset, request.object_size)
        decision = await scheduler.admit(rest)
        assert isinstance(decision, Admitted), decision
        await scheduler.report(decision.grant, Delivered(rest.byte_range))


async def deliver_ranges(scheduler: DownloadScheduler, holders: Holders) -> None:
    """Every holder fetches its next 1 MiB range (untimed): its slot stays busy."""
    for slot, (request, offset) in holders.items():
        following = _next_range(request, offset, RANGE_BYTES)
        decision = await scheduler.admit(following)
        if isinstance(decision, Admitted):
            await scheduler.report(decision.grant, Delivered(following.byte_range))
        assert following.byte_range is not None
        holders[slot] = (request, following.byte_range.end)


# ====================================================================== in memory
async def admit_timed(
    scheduler: InMemoryDownloadScheduler, request: DownloadRequest, result: Admission | None
) -> None:
    """One newcomer in memory, timed as the worker processes time theirs."""
    decision, admit_ms, report_ms = await newcomer_timed(scheduler, request)
    if result is not None:
        result.answers[answer_of(decision)] += 1
        result.admit_ms.append(admit_ms)
        if report_ms is not None:
            result.report_ms.append(report_ms)


async def memory_admissions(count: int) -> Admission:
    """Newcomers on an empty queue, each admitted and completed at once (one task)."""
    scheduler = InMemoryDownloadScheduler(
        settings_for(ADMIT_SESSIONS), ticket_keys=[generate_key()]
    )
    workload = Workload(WAITING)
    result = Admission("newcomer on an empty queue", "in memory")
    base = index_base(ADMITTED, 0, 0)
    requests = [workload.request(base + n) for n in range(count + 1_000)]
    for request in requests[:1_000]:
        await admit_timed(scheduler, request, None)
    cpu = time.process_time()
    started = time.perf_counter()
    for request in requests[1_000:]:
        await admit_timed(scheduler, request, result)
    result.window = time.perf_counter() - started
    result.cpu_seconds = time.process_time() - cpu
    return result


async def memory_queue(ticks: int, newcomers: int) -> tuple[TickResult, Admission]:
    """In-memory tick at 65,536 waiting, then newcomers queued behind them."""
    clock = FakeClock()
    scheduler = InMemoryDownloadScheduler(
        settings_for(TICK_SESSIONS), clock=clock, ticket_keys=[generate_key()]
    )
    workload = Workload(WAITING)
    result = TickResult("in memory")
    holders = await start_holders(scheduler, workload)
    started = time.perf_counter()
    for index in range(WAITING):
        decision = await scheduler.admit(workload.request(index))
        assert isinstance(decision, Queued), decision
    result.fill_seconds = time.perf_counter() - started
    await finish_holders(scheduler, holders, FREE_SLOTS)

    async def tick() -> float:
        clock.advance(TICK_INTERVAL_S)
        await deliver_ranges(scheduler, holders)
        began = time.perf_counter()
        report = await scheduler.tick()
        elapsed = 1000 * (time.perf_counter() - began)
        result.marked += report.marked
        result.expired += report.expired
        return elapsed

    result.first_ms = await tick()
    for _ in range(WARMUP_TICKS - 1):
        await tick()
    result.marked = result.expired = 0
    for _ in range(ticks):
        result.tick_ms.append(await tick())
        result.waiting.append(scheduler.core.waiting_count)

    queued = Admission("newcomer behind the queue", "in memory")
    base = index_base(QUEUED, 8, 0)
    requests = [workload.request(base + n) for n in range(newcomers)]
    queued.waiting_before = scheduler.core.waiting_count
    cpu = time.process_time()
    began = time.perf_counter()
    for request in requests:
        await admit_timed(scheduler, request, queued)
    queued.window = time.perf_counter() - began
    queued.cpu_seconds = time.process_time() - cpu
    queued.waiting_after = scheduler.core.waiting_count
    return result, queued


# ====================================================================== range admission
def range_requests(count: int) -> list[DownloadRequest]:
    """Consecutive 1 MiB ranges of one 64 GiB download (never completes here)."""
    return [
        DownloadRequest(
            principal="range-bench",
            principal_kind=PrincipalKind.SERVICE,
            object_id="artifact-range-bench",
            object_size=RANGE_OBJECT,
            byte_range=ByteRange(n * RANGE_BYTES, (n + 1) * RANGE_BYTES),
            download_id="range-bench-1",
        )
        for n in range(count)
    ]


async def measure_ranges(
    lanes: Sequence[tuple[DownloadScheduler, RangeResult]],
    side: asyncpg.Connection,
    batches: int,
    pairs: int,
    after_activation: Callable[[], contextlib.AbstractContextManager[object]] = (
        contextlib.nullcontext
    ),
) -> None:
    """Range admission of an active session, in two patterns (see the README), for
    several schedulers side by side.

    Each scheduler's first range makes its session active. Their tick loops run beside
    the measurement every 0.5 s, as in a server (for PostgreSQL it renews the lease,
    which keeps it trusted). The patterns run in ``RANGE_ROUNDS`` rounds, each scheduler
    in turn within a round, so that a slow spell of the shared machine falls on all of
    them rather than on whichever was measured then. ``side`` is a connection for the
    equal round trip of pattern B; everything after the activations runs inside
    ``after_activation()``.
    """
    per_round = (max(1, batches // RANGE_ROUNDS), max(1, pairs // RANGE_ROUNDS))
    count = 1 + RANGE_ROUNDS * ((per_round[0] + 1) * RANGES_IN_FLIGHT + per_round[1] + 100)
    streams = []
    for scheduler, _ in lanes:
        requests = iter(range_requests(count))
        first_request = next(requests)
        first = await scheduler.admit(first_request)
        assert isinstance(first, Admitted), first
        await scheduler.report(first.grant, Delivered(first_request.byte_range))
        streams.append(requests)
    stop = asyncio.Event()

    async def tick_loop(scheduler: DownloadScheduler) -> None:
        while not stop.is_set():
            await scheduler.tick()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), TICK_INTERVAL_S)

    tickers = [asyncio.create_task(tick_loop(scheduler)) for scheduler, _ in lanes]
    try:
        with after_activation():
            for _ in range(RANGE_ROUNDS):
                for (scheduler, result), requests in zip(lanes, streams, strict=True):
                    await _range_patterns(scheduler, side, requests, *per_round, result)
    finally:
        stop.set()
        await asyncio.gather(*tickers)


async def _range_patterns(
    scheduler: DownloadScheduler,
    side: asyncpg.Connection,
    requests: Iterator[DownloadRequest],
    batches: int,
    pairs: int,
    result: RangeResult,
) -> None:
    # A: RANGES_IN_FLIGHT ranges admitted back to back, then reported one by one.
    for batch in range(1 + batches):  # the first batch warms up
        admitted: list[tuple[DownloadRequest, Admitted]] = []
        for request in itertools.islice(requests, RANGES_IN_FLIGHT):
            started = time.perf_counter_ns()
            decision = await scheduler.admit(request)
            elapsed = time.perf_counter_ns() - started
            assert isinstance(decision, Admitted), decision
            admitted.append((request, decision))
            if batch:
                result.batch_admit_us.append(elapsed / 1000)
        for request, decision in admitted:
            await scheduler.report(decision.grant, Delivered(request.byte_range))
    # B: one range at a time; before each admit the same round trip in both.
    for pair in range(100 + pairs):  # the first 100 warm up
        request = next(requests)
        await side.fetchval("SELECT 1")
        started = time.perf_counter_ns()
        decision = await scheduler.admit(request)
        admitted_at = time.perf_counter_ns()
        assert isinstance(decision, Admitted), decision
        await scheduler.report(decision.grant, Delivered(request.byte_range))
        reported = time.perf_counter_ns()
        if pair >= 100:
            result.admit_us.append((admitted_at - started) / 1000)
            result.report_us.append((reported - admitted_at) / 1000)
            result.pair_us.append((reported - started) / 1000)


def range_settings() -> SchedulerSettings:
    return settings_for(TICK_SESSIONS).with_changes(ranges_per_session=RANGES_IN_FLIGHT)


async def side_by_side_ranges(
    dsn: str, schema: str, batches: int, pairs: int
) -> tuple[RangeResult, RangeResult]:
    """Range admission in memory and on PostgreSQL, measured in alternating rounds."""
    memory = InMemoryDownloadScheduler(range_settings(), ticket_keys=[generate_key()])
    postgres = await PostgresScheduler.connect(
        dsn, schema=schema, settings=range_settings(), node_id="bench-ranges"
    )
    side = await asyncpg.connect(dsn)
    in_memory, on_postgres = RangeResult("in memory"), RangeResult("PostgreSQL")
    trace = StatementTrace()
    trace.install()
    statements = Breakdown()
    try:
        # An admit that finds no trusted lease asks the database (ADMIT_SESSION, or
        # SESSION_WITH_LEASE while closing); neither tick loop nor the in-memory
        # scheduler sends either.
        await measure_ranges(
            [(memory, in_memory), (postgres, on_postgres)],
            side,
            batches,
            pairs,
            lambda: trace.recording(statements),
        )
    finally:
        trace.uninstall()
        await side.close()
        await postgres.disconnect()
    on_postgres.database_admits = sum(
        count
        for name, count in statements.count.items()
        if name in ("ADMIT_SESSION", "SESSION_WITH_LEASE")
    )
    return in_memory, on_postgres


# ====================================================================== tick
async def postgres_queue(
    dsn: str, schema: str, ticks: int
) -> tuple[TickResult, Breakdown, Breakdown]:
    """The leader's tick at 65,536 waiting; then traced ticks and traced newcomers.

    Leaves the queue for the queued-admission phase: the holders' leases are extended
    and their holder leaves the fleet, so none of them is idle or reaped meanwhile.
    """
    result = TickResult("PostgreSQL (leader)")
    settings = settings_for(TICK_SESSIONS)
    scheduler = await PostgresScheduler.connect(
        dsn, schema=schema, settings=settings, node_id="bench-leader"
    )
    workload = Workload(WAITING)
    connection = await _connect(dsn, schema)
    trace = StatementTrace()
    try:
        holders = await start_holders(scheduler, workload)
        started = time.perf_counter()
        await fill_waiting(connection, workload, range(WAITING), time.time(), settings)
        result.fill_seconds = time.perf_counter() - started
        await finish_holders(scheduler, holders, FREE_SLOTS)

        async def tick() -> float:
            await asyncio.sleep(TICK_INTERVAL_S)
            await deliver_ranges(scheduler, holders)
            began = time.perf_counter()
            report = await scheduler.tick()
            elapsed = 1000 * (time.perf_counter() - began)
            if not scheduler.is_leader:
                raise RuntimeError("the benchmark's only process did not lead")
            result.marked += report.marked
            result.expired += report.expired
            return elapsed

        result.first_ms = await tick()
        for _ in range(WARMUP_TICKS - 1):
            await tick()
        result.marked = result.expired = 0
        for _ in range(ticks):
            result.tick_ms.append(await tick())
            result.waiting.append(
                int(
                    await connection.fetchval(
                        "SELECT count(*) FROM download_session WHERE state = 0"
                    )
                )
            )
        trace.install()
        ticked = Breakdown()
        for _ in range(TRACED_TICKS):
            await asyncio.sleep(TICK_INTERVAL_S)
            await deliver_ranges(scheduler, holders)
            with trace.recording(ticked):
                await scheduler.tick()
            ticked.calls += 1
        queued = Breakdown()
        base = index_base(QUEUED, 7, 0)
        for n in range(10 + TRACED_CALLS):
            request = workload.request(base + n)
            if n < 10:
                await scheduler.admit(request)
                continue
            with trace.recording(queued):
                decision = await scheduler.admit(request)
            assert isinstance(decision, Queued), decision
            queued.calls += 1
        await connection.execute(
            "UPDATE download_slot SET lease_expires_at = now() + interval '1 hour' "
            "WHERE session_key IS NOT NULL"
        )
    finally:
        trace.uninstall()
        await connection.close()
        await scheduler.disconnect()
    return result, ticked, queued


async def trace_admitted(dsn: str, schema: str) -> tuple[Breakdown, Breakdown]:
    """Statements of an admitted newcomer's ``admit`` and of its completing ``report``."""
    scheduler = await PostgresScheduler.connect(
        dsn, schema=schema, settings=settings_for(ADMIT_SESSIONS), node_id="bench-trace"
    )
    workload = Workload(WAITING)
    trace = StatementTrace()
    trace.install()
    admits, reports = Breakdown(), Breakdown()
    try:
        base = index_base(ADMITTED, 6, 0)
        for n in range(20 + TRACED_CALLS):
            request = workload.request(base + n)
            measured = n >= 20
            with trace.recording(admits if measured else Breakdown()):
                decision = await scheduler.admit(request)
            assert isinstance(decision, Admitted), decision
            with trace.recording(reports if measured else Breakdown()):
                await scheduler.report(decision.grant, Delivered(ByteRange(0, request.object_size)))
            admits.calls += measured
            reports.calls += measured
    finally:
        trace.uninstall()
        await scheduler.disconnect()
    return admits, reports


# ====================================================================== report
async def server_info(dsn: str) -> tuple[str, dict[str, str]]:
    connection = await asyncpg.connect(dsn)
    try:
        server = await connection.fetchval("SHOW server_version")
        names = ("shared_buffers", "synchronous_commit", "fsync", "max_connections")
        values = {name: str(await connection.fetchval(f"SHOW {name}")) for name in names}
    finally:
        await connection.close()
    return str(server), values


def _share(value: float) -> str:
    """A fraction as a percentage, or "–" when it was not measured (NaN)."""
    return "–" if math.isnan(value) else f"{value:.0%}"


def _turn_ms(tasks: int, throughput: float) -> float:
    """Little's law: the mean turn of a task, tasks in flight ÷ throughput."""
    return 1000 * tasks / throughput if throughput > 0 else math.nan


def _answers(answers: Counter[str]) -> str:
    return ", ".join(f"{count:,} {answer}" for answer, count in sorted(answers.items()))


_ADMISSION_WORKLOADS = ("newcomer on an empty queue", "newcomer behind the queue")
CLAIM_LABEL = "bare `CLAIM_SLOT` + `RELEASE_SLOT`"
_EXPECTED_ANSWERS = {_ADMISSION_WORKLOADS[0]: "admitted", _ADMISSION_WORKLOADS[1]: "queued"}


def _postgres(run: Run, label: str, *, open_loop: bool) -> list[Admission]:
    return [
        a
        for a in run.admissions
        if a.implementation == "PostgreSQL" and a.label == label and a.open_loop == open_loop
    ]


def _misanswered(a: Admission) -> str:
    """What kept a workload from answering as it should (empty when nothing did)."""
    expected = _EXPECTED_ANSWERS.get(a.label)
    total = sum(a.answers.values())
    other = total - a.answers[expected] if expected is not None else 0
    if not other:
        return ""
    if a.label == _ADMISSION_WORKLOADS[0]:
        return f"; {other:,} of {total:,} not admitted: the queue did not stay empty"
    return f"; {other:,} of {total:,} not {expected}"


def target_rows(run: Run) -> list[str]:
    rows = ["| Target | Measured | Result |", "| --- | --- | --- |"]
    target = f"new-session admission p99 ≤ {ADMISSION_P99_TARGET_MS:g} ms, {PROCESSES} processes"
    for label in _ADMISSION_WORKLOADS:
        for a in _postgres(run, label, open_loop=True):
            notes = _misanswered(a)
            if not a.rate_kept:
                notes += "; rate not kept: saturated"
            if a.unfinished:
                notes += f"; {a.unfinished:,} unfinished"
            ok = a.p99 <= ADMISSION_P99_TARGET_MS and not notes
            rows.append(
                f"| {target}, open loop at {_rate(a.rate)}/s offered: {label} "
                f"| p99 {_ms(a.p99)} (p50 {_ms(a.p50)}, max {_ms(a.max_ms)}"
                f"; achieved {a.throughput:,.0f}/s of {a.scheduled_rate:,.0f}/s offered{notes}) "
                f"| {verdict(ok)} |"
            )
        for a in _postgres(run, label, open_loop=False):
            notes = _misanswered(a)
            if a.in_flight > 1:
                tasks = a.processes * a.in_flight
                turn = "`admit` + `report`" if a.report_ms else "`admit`"
                notes += (
                    "; saturation throughput: queueing at saturation, not the cost of an "
                    f"admission: {tasks} in flight ÷ {a.throughput:,.0f}/s = "
                    f"{_ms(_turn_ms(tasks, a.throughput))} per {turn} (measured mean "
                    f"{_ms(a.mean_turn_ms)})"
                )
            ok = a.p99 <= ADMISSION_P99_TARGET_MS and not _misanswered(a)
            # At saturation the latency is the wait for a turn, which any load beyond
            # capacity makes as long as it likes: a capacity reading, not a latency one.
            result = (
                "capacity (no latency verdict)"
                if a.in_flight > 1 and not _misanswered(a)
                else verdict(ok)
            )
            rows.append(
                f"| {target} × {a.in_flight} in flight, closed loop: {label} "
                f"| p99 {_ms(a.p99)} (p50 {_ms(a.p50)}, {a.throughput:,.0f}/s{notes}) "
                f"| {result} |"
            )
    memory, postgres = run.ranges.get("in memory"), run.ranges.get("PostgreSQL")
    if memory is not None and postgres is not None:
        ratio_a = median(postgres.batch_admit_us) / median(memory.batch_admit_us)
        ratio_b = median(postgres.admit_us) / median(memory.admit_us)
        rows.append(
            f"| range admission of an active session ≤ {RANGE_RATIO_TARGET:g}× in memory "
            f"(median `admit`, no round trip) | A: {_us(median(postgres.batch_admit_us))} vs "
            f"{_us(median(memory.batch_admit_us))} = {ratio_a:.2f}×; B: "
            f"{_us(median(postgres.admit_us))} vs {_us(median(memory.admit_us))} = "
            f"{ratio_b:.2f}×; {postgres.database_admits} round trips "
            f"| {verdict(max(ratio_a, ratio_b) <= RANGE_RATIO_TARGET)} |"
        )
    tick = run.ticks.get("PostgreSQL (leader)")
    if tick is not None:
        p95 = quantile(tick.tick_ms, 0.95)
        rows.append(
            f"| leader's tick ≤ {TICK_TARGET_MS:g} ms at {WAITING:,} waiting (median) "
            f"| median {_ms(median(tick.tick_ms))}, p95 {_ms(p95)}, max "
            f"{_ms(max(tick.tick_ms))} | {verdict(median(tick.tick_ms) <= TICK_TARGET_MS)} |"
        )
    return rows


def admission_rows(run: Run) -> list[str]:
    rows = [
        "| workload | implementation | processes × in flight | answers (measured) "
        "| throughput | p50 | p90 | p99 | max | p50 / p99 vs in memory "
        "| throughput vs in memory | CPU per admission (scheduler processes) "
        "| machine CPU busy |",
        "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for a in run.admissions:
        if a.open_loop:
            continue
        memory = run.admission("in memory", a.label, 1)
        versus = throughput = "–"
        if memory is not None and a.implementation == "PostgreSQL":
            versus = f"{_ratio(a.p50 / memory.p50)} / {_ratio(a.p99 / memory.p99)}"
            throughput = _ratio(a.throughput / memory.throughput)
        busy = _share(a.machine_busy)
        rows.append(
            f"| {a.label} | {a.implementation} | {a.processes} × {a.in_flight} "
            f"| {_answers(a.answers)} | {a.throughput:,.0f}/s | {_ms(a.p50)} "
            f"| {_ms(quantile(a.admit_ms, 0.9))} | {_ms(a.p99)} | {_ms(max(a.admit_ms))} "
            f"| {versus} | {throughput} | {_ms(a.cpu_per_admission_ms)} | {busy} |"
        )
    return rows


def open_rows(run: Run) -> list[str]:
    rows = [
        "| workload | offered | scheduled in window | achieved | rate kept "
        "| answers (measured) | p50 | p90 | p99 | max | in flight: most / mean "
        "| start lag p99 / max | completing `report` p50 / p99 "
        "| CPU per admission (scheduler processes) | machine CPU busy |",
        "| --- | ---: | ---: | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: | ---: | ---: |",
    ]
    for a in run.admissions:
        if not a.open_loop:
            continue
        busy = _share(a.machine_busy)
        report = (
            f"{_ms(median(a.report_ms))} / {_ms(quantile(a.report_ms, 0.99))}"
            if a.report_ms
            else "–"
        )
        rows.append(
            f"| {a.label} | {_rate(a.rate)}/s | {a.scheduled_rate:,.0f}/s ({a.offered:,}) "
            f"| {a.throughput:,.0f}/s | {'yes' if a.rate_kept else 'no'} "
            f"| {_answers(a.answers)} | {_ms(a.p50)} | {_ms(quantile(a.admit_ms, 0.9))} "
            f"| {_ms(a.p99)} | {_ms(a.max_ms)} "
            f"| {a.most_in_flight} / {a.mean_in_flight:.1f} "
            f"| {_ms(quantile(a.lag_ms, 0.99))} / {_ms(max(a.lag_ms, default=math.nan))} "
            f"| {report} | {_ms(a.cpu_per_admission_ms)} | {busy} |"
        )
    return rows


def little_rows(run: Run) -> list[str]:
    """The closed loops by Little's law: tasks in flight ÷ throughput = mean turn."""
    rows = [
        "| workload | processes × in flight | throughput | in flight ÷ throughput "
        "| measured mean `admit` (+ `report`) | mean `admit` | p99 `admit` "
        "| machine CPU busy |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for label in _ADMISSION_WORKLOADS:
        for a in _postgres(run, label, open_loop=False):
            busy = _share(a.machine_busy)
            mean_admit = sum(a.admit_ms) / len(a.admit_ms) if a.admit_ms else math.nan
            rows.append(
                f"| {a.label} | {a.load} | {a.throughput:,.0f}/s "
                f"| {_ms(_turn_ms(a.processes * a.in_flight, a.throughput))} "
                f"| {_ms(a.mean_turn_ms)} | {_ms(mean_admit)} | {_ms(a.p99)} | {busy} |"
            )
    return rows


def report_rows(run: Run) -> list[str]:
    rows = [
        "| implementation | load | completing `report` p50 | p99 |",
        "| --- | --- | ---: | ---: |",
    ]
    for a in run.admissions:
        if a.label == _ADMISSION_WORKLOADS[0] and a.report_ms:
            rows.append(
                f"| {a.implementation} | {a.load} "
                f"| {_ms(median(a.report_ms))} | {_ms(quantile(a.report_ms, 0.99))} |"
            )
    return rows


def range_rows(run: Run) -> list[str]:
    memory, postgres = run.ranges.get("in memory"), run.ranges.get("PostgreSQL")
    if memory is None or postgres is None:
        return ["not run"]
    rows = [
        "| call | in memory p50 | in memory p99 | PostgreSQL p50 | PostgreSQL p99 "
        "| PostgreSQL ÷ in memory (p50) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, attribute in (
        (f"A: `admit`, {RANGES_IN_FLIGHT} ranges in flight, back to back", "batch_admit_us"),
        ("B: `admit`, one range at a time (after an equal round trip)", "admit_us"),
        ("B: `report(Delivered)` of that range", "report_us"),
        ("B: `admit` + `report`", "pair_us"),
    ):
        m, p = getattr(memory, attribute), getattr(postgres, attribute)
        rows.append(
            f"| {name} | {_us(median(m))} | {_us(quantile(m, 0.99))} | {_us(median(p))} "
            f"| {_us(quantile(p, 0.99))} | {median(p) / median(m):.2f}× |"
        )
    return rows


def tick_rows(run: Run) -> list[str]:
    rows = [
        "| implementation | waiting | measured ticks | median | p95 | max | first tick "
        "| marked per tick | fill |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for t in run.ticks.values():
        fill = (
            f"{t.fill_seconds:.1f} s (`COPY`)"
            if t.label.startswith("PostgreSQL")
            else f"{t.fill_seconds:.1f} s (`admit`)"
        )
        rows.append(
            f"| {t.label} | {min(t.waiting):,}–{max(t.waiting):,} | {len(t.tick_ms)} "
            f"| {_ms(median(t.tick_ms))} | {_ms(quantile(t.tick_ms, 0.95))} "
            f"| {_ms(max(t.tick_ms))} | {_ms(t.first_ms)} "
            f"| {t.marked / max(1, len(t.tick_ms)):.1f} | {fill} |"
        )
    return rows


_TRACE_TITLES = {
    "admit: newcomer on an empty queue (admitted)": "admitted",
    "report: completing that download": "completed",
    "admit: newcomer behind 65,536 waiting (queued)": "queued",
    "leader's tick at 65,536 waiting": "tick",
}


def trace_rows(run: Run) -> list[str]:
    rows = [
        "| call | statements per call | database time per call | the most expensive "
        "(statements per call, time per call) |",
        "| --- | ---: | ---: | --- |",
    ]
    for title, key in _TRACE_TITLES.items():
        breakdown = run.traces.get(key)
        if breakdown is None or not breakdown.calls:
            continue
        top = "; ".join(
            f"`{name}` {count:g}× {_ms(ms)}" for name, count, ms in breakdown.rows()[:6]
        )
        rows.append(f"| {title} | {breakdown.statements:.1f} | {_ms(breakdown.total_ms)} | {top} |")
    return rows


def render(run: Run, argv: Sequence[str], wall: float, loads: tuple[str, str]) -> str:
    now = datetime.datetime.now(datetime.UTC)
    command = shlex.join(["python", "-m", "benchmarks.pg_bench", *argv])
    settings = run.server_settings
    claim = next(iter(_postgres(run, CLAIM_LABEL, open_loop=False)), None)
    queued = [
        a
        for a in run.admissions
        if a.implementation == "PostgreSQL" and a.label == _ADMISSION_WORKLOADS[1]
    ]
    seeded = "" if run.seed is None else f"; open-loop arrival gaps seeded with {run.seed}"
    lines = [
        SECTION_HEADING,
        "",
        f"- Command: `make bench-pg` (= `.venv/bin/{command}`, from the project root)",
        f"- Machine: {cpu_count()} CPUs (`nproc`), {cpu_model()}, "
        f"{platform.system()} {platform.release()}; PostgreSQL {run.server_version} on the "
        f"same machine (shared_buffers {settings.get('shared_buffers')}, synchronous_commit "
        f"{settings.get('synchronous_commit')}, fsync {settings.get('fsync')})",
        f"- Python: {platform.python_implementation()} {platform.python_version()}, asyncpg "
        f"{package_version('asyncpg')}",
        f"- Date: {now:%Y-%m-%d %H:%M} UTC; whole run {wall:.0f} s; load average "
        f"(1 / 5 / 15 min) {loads[0]} before, {loads[1]} after",
        f"- Settings: newcomers on an empty queue: sessions={ADMIT_SESSIONS}; the "
        f"{WAITING:,} queue: sessions={TICK_SESSIONS} ({TICK_SESSIONS - FREE_SLOTS} held, "
        f"{FREE_SLOTS} free); both queue_limit={QUEUE_LIMIT:,}, queue_per_principal=4,096, "
        f"strategy ordered, tickets on; leases 10 s; pool of {POOL_SIZE} connections per "
        f"process{seeded}",
        "",
        "### Targets",
        "",
        *target_rows(run),
        "",
    ]
    if any(a.open_loop for a in run.admissions):
        lines += [
            f"### New-session admission, open loop ({PROCESSES} processes sharing one schema)",
            "",
            *open_rows(run),
            "",
            "Each process offers a third of the rate: newcomers at exponentially distributed "
            "gaps (seeded), written to the process's pipe at their time by the parent process "
            "and each run in a task of its own, however many are in flight. Latency "
            "runs from a newcomer's scheduled arrival until `admit` returns, so time the "
            f"process or its connection pool ({POOL_SIZE} connections) kept it waiting "
            "counts; start lag is the part before its task ran. Achieved is answers returned "
            "in the window per second; the rate is kept when that is at least "
            f"{RATE_KEPT:.0%} of the newcomers scheduled in the window (the draw of the "
            "gaps, near the offered rate), else the system is saturated at that rate and the "
            "latency grows with the window. In flight counts newcomers scheduled and not yet "
            "answered, all processes together. After the window, newcomers still running get "
            f"{DRAIN_SECONDS:g} s to finish, the rest are counted unfinished. `report` is "
            "timed from the answer. On the empty queue a newcomer that finds no free slot "
            f"(the {ADMIT_SESSIONS} slots all held by newcomers admitted and still waiting "
            "for their `report`, as when the rate is not kept or a process stalls) is "
            "queued, and since the benchmark's newcomers never come back, every later one "
            "queues behind it: answers other than admitted mean the queue did not stay empty. "
            "The floor (the bare `CLAIM_SLOT` statement, then `RELEASE_SLOT`, from the same "
            "three processes on connections of their own) replays the arrivals of the "
            "newcomers on an empty queue: what the machine, the harness and one claim "
            "take of the latency at that rate.",
            "",
        ]
    lines += [
        f"### New-session admission, closed loop ({PROCESSES} processes sharing one schema)",
        "",
        *admission_rows(run),
        "",
        "Latency is one `admit` call of a newcomer (a download the queue has not seen); "
        "throughput is measured `admit` calls per second of the window, all processes "
        "together. In memory is one process, one call at a time. CPU per admission is "
        "the CPU time of the scheduler processes (their ticks included) over the window ÷ "
        "the admissions; the database's own CPU is not in it. Machine CPU busy counts "
        "every process on the machine, not only the benchmark's.",
        "",
        "A closed loop sends the next newcomer when the last is answered, so it runs as "
        "fast as the machine allows: its throughput is the capacity, and once the machine "
        "is saturated its latency is queueing (Little's law: tasks in flight ÷ throughput "
        "= mean turn of a task), not the cost of one admission:",
        "",
        *little_rows(run),
        "",
    ]
    if claim is not None:
        lines += [
            f"Floor: the bare `CLAIM_SLOT` statement (then `RELEASE_SLOT`), each in "
            f"autocommit, {PROCESSES} processes × {claim.in_flight} in flight: "
            f"{claim.throughput:,.0f} claims/s, p50 {_ms(claim.p50)}, p99 {_ms(claim.p99)} "
            f"(the issue's reference for this statement: {CLAIM_REFERENCE}).",
            "",
        ]
    if queued:
        lines += [
            "Newcomers behind the queue: waiting sessions "
            + "; ".join(f"{a.waiting_before:,} → {a.waiting_after:,} ({a.load})" for a in queued)
            + ". The leader among the three processes ticked meanwhile: "
            + "; ".join(
                f"median {_ms(median(a.leader_tick_ms))}, max "
                f"{_ms(max(a.leader_tick_ms, default=math.nan))} ({a.load})"
                for a in queued
            )
            + ".",
            "",
        ]
    lines += [
        "Completing `report` of each admitted newcomer (whole object delivered: the slot "
        "is released and the session deleted):",
        "",
        *report_rows(run),
        "",
        "### Range admission of an active session (lease cache)",
        "",
        *range_rows(run),
        "",
        f"The target is about `admit` (no round trip): database round trips on the range "
        f"path during the measurement: {run.ranges['PostgreSQL'].database_admits}. "
        "`report` writes the delivered range (a transaction), so `admit` + `report` is "
        "dominated by that write."
        if "PostgreSQL" in run.ranges
        else "",
        "",
        f"### Tick at {WAITING:,} waiting sessions",
        "",
        *tick_rows(run),
    ]
    memory_tick, postgres_tick = run.ticks.get("in memory"), run.ticks.get("PostgreSQL (leader)")
    if memory_tick is not None and postgres_tick is not None:
        lines += [
            "",
            f"PostgreSQL ÷ in memory (median tick): "
            f"{_ratio(median(postgres_tick.tick_ms) / median(memory_tick.tick_ms))}. The "
            "first tick of a new leader also forgets old round-robin turns (then once a "
            "minute).",
        ]
    lines += [
        "",
        "### Statements per call (traced, one process, sequential)",
        "",
        *trace_rows(run),
        "",
        "Every statement is a round trip; `BEGIN`, `COMMIT` and savepoints included. "
        "Times are wall-clock round trips seen by the process, not server time.",
        "",
        "### Run details",
        "",
        "- Phases: " + "; ".join(f"{name} {seconds:.0f} s" for name, seconds in run.phases),
        f"- The {WAITING:,} waiting sessions are written with `COPY` as `INSERT_SESSION` and "
        "`ROUND_TAG` write them (arrivals over the last 300 s, last polls spread over 300 s), "
        "followed by `VACUUM (ANALYZE)` of the queue's tables; the in-memory queue is "
        "filled with `admit`. See `benchmarks/README.md`.",
        "- Worker ticks during the PostgreSQL admission windows: "
        + "; ".join(
            f"{a.label}, {a.load}: {a.ticks} ticks, {a.leaders} leader"
            for a in run.admissions
            if a.implementation == "PostgreSQL" and a.ticks
        ),
        "",
    ]
    return "\n".join(lines)


# ====================================================================== main
def reach_server(dsn: str) -> tuple[str, dict[str, str]] | None:
    """The server's version and settings (``server_info``), or None with a note on how
    to point the benchmark at a server."""
    try:
        return run_async(server_info(dsn), 30)
    except (OSError, asyncpg.PostgresError, TimeoutError) as error:
        log(f"PostgreSQL is not reachable at {dsn}: {error}")
        log(f"Start it, or point ${DSN_VARIABLE} (or --dsn) at a server; see benchmarks/README.md.")
        return None


def parse_levels(text: str) -> tuple[int, ...]:
    levels = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    if not levels or any(level < 1 or level > 7 for level in levels):
        raise argparse.ArgumentTypeError("in-flight levels are 1 to 7 (pools of 8 connections)")
    return levels


def parse_rates(text: str) -> tuple[float, ...]:
    if text.strip().lower() == "none":
        return ()
    try:
        rates = tuple(sorted({float(part) for part in text.split(",") if part.strip()}))
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"rates are numbers or none: {error}") from error
    if not rates or any(not math.isfinite(rate) or rate <= 0 for rate in rates):
        raise argparse.ArgumentTypeError("rates are positive newcomers per second, or none")
    return rates


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.pg_bench",
        description="PostgresScheduler side by side with InMemoryDownloadScheduler.",
    )
    parser.add_argument(
        "--dsn", default=None, help=f"database (default ${DSN_VARIABLE} or {DEFAULT_DSN})"
    )
    parser.add_argument(
        "--in-flight",
        type=parse_levels,
        default=LEVELS,
        help="closed loop: admissions in flight per process, comma-separated (default 1,4)",
    )
    parser.add_argument(
        "--rates",
        type=parse_rates,
        default=RATES,
        help="open loop: newcomers per second offered by the three processes together, "
        "comma-separated, or none (default 150,300)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=SEED,
        help=f"open loop: seed of the arrival gaps (default {SEED})",
    )
    parser.add_argument(
        "--duration", type=float, default=None, help=f"seconds per window (default {DURATION_S:g})"
    )
    parser.add_argument("--ticks", type=int, default=None, help=f"measured ticks (default {TICKS})")
    parser.add_argument("--quick", action="store_true", help="short windows, print only")
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help="markdown file to update (default benchmarks/RESULTS.md, none with --quick)",
    )
    return parser


def exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)  # unwinds through the phases: schemas are dropped


def main(argv: Sequence[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, exit_on_sigterm)
    args_list = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(args_list)
    dsn: str = args.dsn or os.environ.get(DSN_VARIABLE) or DEFAULT_DSN
    quick: bool = args.quick
    duration: float = args.duration or (QUICK_DURATION_S if quick else DURATION_S)
    ticks: int = args.ticks or (QUICK_TICKS if quick else TICKS)
    levels: tuple[int, ...] = args.in_flight
    rates: tuple[float, ...] = args.rates
    seed: int = args.seed
    loads = [Load(tasks=level) for level in levels] + [Load(rate=rate) for rate in rates]
    if len(loads) > MAX_RUNS:
        log(f"at most {MAX_RUNS} in-flight levels and rates together")
        return 2
    newcomers = QUICK_MEMORY_NEWCOMERS if quick else MEMORY_NEWCOMERS
    batches, pairs = (
        (QUICK_RANGE_BATCHES, QUICK_RANGE_PAIRS) if quick else (RANGE_BATCHES, RANGE_PAIRS)
    )
    output: Path | None = args.output or (None if quick else RESULTS_PATH)
    run = Run(seed=seed if rates else None)
    reached = reach_server(dsn)
    if reached is None:
        return 2
    run.server_version, run.server_settings = reached
    load_before = load_average()
    began = time.perf_counter()

    with phase(run, "in memory"):
        run.admissions.append(run_async(memory_admissions(newcomers)))
        memory_tick, memory_queued = run_async(memory_queue(ticks, newcomers))
        run.ticks["in memory"] = memory_tick
        run.admissions.append(memory_queued)
    with phase(run, "bare claim"), throwaway_schema(dsn, "claim") as schema:
        settings = settings_for(ADMIT_SESSIONS)
        claim = postgres_admissions(
            CLAIM_LABEL, CLAIM, dsn, schema, settings, Load(tasks=max(levels)), duration
        )
        run.admissions.append(claim)
        for run_number, rate in enumerate(rates, start=1):
            run.admissions.append(
                postgres_admissions(
                    CLAIM_LABEL,
                    CLAIM,
                    dsn,
                    schema,
                    settings,
                    Load(rate=rate),
                    duration,
                    seed=seed,
                    run_number=run_number,
                )
            )
    for load in loads:
        with (
            phase(run, f"newcomers on an empty queue, {load.phase}"),
            throwaway_schema(dsn, "admit") as schema,
        ):
            run.admissions.append(
                postgres_admissions(
                    _ADMISSION_WORKLOADS[0],
                    ADMITTED,
                    dsn,
                    schema,
                    settings_for(ADMIT_SESSIONS),
                    load,
                    duration,
                    seed=seed,
                )
            )
    with phase(run, "range admission"), throwaway_schema(dsn, "ranges") as schema:
        run.ranges["in memory"], run.ranges["PostgreSQL"] = run_async(
            side_by_side_ranges(dsn, schema, batches, pairs)
        )
    with phase(run, "traced admission"), throwaway_schema(dsn, "trace") as schema:
        run.traces["admitted"], run.traces["completed"] = run_async(trace_admitted(dsn, schema))
    with throwaway_schema(dsn, "queue") as schema:
        with phase(run, f"tick at {WAITING:,} waiting"):
            tick, run.traces["tick"], run.traces["queued"] = run_async(
                postgres_queue(dsn, schema, ticks)
            )
            run.ticks["PostgreSQL (leader)"] = tick
        for run_number, load in enumerate(loads):
            with phase(run, f"newcomers behind the queue, {load.phase}"):
                before = run_async(_count_waiting(dsn, schema), 30)
                queued = postgres_admissions(
                    _ADMISSION_WORKLOADS[1],
                    QUEUED,
                    dsn,
                    schema,
                    settings_for(TICK_SESSIONS),
                    load,
                    duration,
                    seed=seed,
                    run_number=run_number,
                )
                queued.waiting_before = before
                queued.waiting_after = run_async(_count_waiting(dsn, schema), 30)
                run.admissions.append(queued)
    order = {"in memory": 0, "PostgreSQL": 1}
    labels = {_ADMISSION_WORKLOADS[0]: 0, _ADMISSION_WORKLOADS[1]: 1}
    run.admissions.sort(
        key=lambda a: (labels.get(a.label, 2), order[a.implementation], a.rate, a.in_flight)
    )
    wall = time.perf_counter() - began
    section = render(run, args_list, wall, (load_before, load_average()))
    print(section)
    if output is not None:
        write_section(output, SECTION_HEADING, section)
        log(f"written to {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
