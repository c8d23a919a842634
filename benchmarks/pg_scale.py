"""The shared queue at 65,536 and 1,048,576 waiting: ``PostgresScheduler`` beside
``InMemoryDownloadScheduler`` in the same run.

Run with ``python -m benchmarks.pg_scale`` (65,536 waiting, ``make bench-pg``) or
``--sizes 65536,1048576`` (``make bench-pg-million``, about three minutes on two CPUs);
``benchmarks/README.md`` explains the workload. Needs a PostgreSQL server
(``$ARKVORY_TEST_DATABASE_URL``, default ``postgresql://postgres@127.0.0.1:5432/test``).

Each size fills both stores with the same waiting downloads behind 16 slot holders
(``_scale_queue``), then one process runs the same clients against each: polls at the
first, middle and last position, newcomers, range admissions of an active download,
and ticks, a slot freeing before each and the head of the queue claiming it after. On
PostgreSQL this process is the fleet's only node, so it leads and its timed ticks are the
leader's. Every figure stands beside the in-memory store's, measured minutes apart on
the same machine, because absolute times on a shared machine move with its load. How
many statements a call sends is asserted by ``tests/postgres/test_one_round_trip.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import gc
import itertools
import os
import platform
import secrets
import shlex
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Final

import asyncpg

from arkvory_sched import (
    Admitted,
    ByteRange,
    Decision,
    Delivered,
    DownloadRequest,
    DownloadScheduler,
    InMemoryDownloadScheduler,
    Queued,
    generate_key,
)
from arkvory_sched.postgres import PostgresScheduler
from arkvory_sched.postgres._leader import PLACE_BUCKET
from arkvory_sched.testing import FakeClock
from benchmarks._machine import cpu_count, cpu_model, load_average
from benchmarks._report import (
    RESULTS_PATH,
    format_ms,
    format_ratio,
    median,
    package_version,
    quantile,
    ratio,
    verdict,
    write_section,
)
from benchmarks._scale_queue import (
    RANGE_BYTES,
    SESSIONS,
    ScaleWorkload,
    fill_memory,
    fill_postgres,
    holder_request,
    scale_settings,
    waiting_for,
)

__all__ = ["main"]

DEFAULT_DSN: Final = "postgresql://postgres@127.0.0.1:5432/test"
DSN_VARIABLE: Final = "ARKVORY_TEST_DATABASE_URL"
STEP: Final = 0.5  # seconds between ticks, the production interval
WARMUP: Final = 4  # calls (or ticks) of each kind before the measured ones
FOLD_TIMEOUT_S: Final = 1_800.0
SHOWN: Final = ("server_version", "shared_buffers", "synchronous_commit")
POSITIONS: Final = ("first", "middle", "last")
Step = Callable[[], Awaitable[None]]  # lets one tick interval pass
# The goals, checked at the largest size of the run.
POLL_P50_GOAL_MS: Final = 2.0
POLL_P99_GOAL_MS: Final = 5.0
LAST_FIRST_GOAL: Final = 1.5
RANGE_GOAL: Final = 2.0  # range admission, PostgreSQL ÷ in memory (median)
TICK_GOAL_MS: Final = 100.0
NEWCOMER_GROWTH_GOAL: Final = 1.5  # newcomer p99 at the largest size ÷ at the smallest
GROWTH_SHARE: Final = 0.1  # the tick grows by at most a tenth of the queue's growth


@dataclass(frozen=True, slots=True)
class Effort:
    """How many calls each figure takes: the full run, or ``--quick``."""

    polls: int  # per position
    newcomers: int
    ranges: int
    ticks: int


FULL: Final = Effort(polls=100, newcomers=500, ranges=400, ticks=40)
QUICK: Final = Effort(polls=15, newcomers=30, ranges=40, ticks=6)


@dataclass(slots=True)
class Figures:
    """One store at one size: seconds per call, and what went wrong."""

    store: str
    polls: dict[str, list[float]] = field(default_factory=dict)
    positions: dict[str, list[int | None]] = field(default_factory=dict)
    newcomers: list[float] = field(default_factory=list)
    ranges: list[float] = field(default_factory=list)
    ticks: list[float] = field(default_factory=list)
    claims: int = 0
    unexpected: int = 0  # answers of the wrong kind
    unled: int = 0  # PostgreSQL ticks that did not lead


@dataclass(slots=True)
class _Holder:
    request: DownloadRequest
    offset: int  # the next byte it fetches
    finishes: bool  # release holders finish in turn; the interactive one never does


# ====================================================================== the clients
class Clients:
    """The clients of one store: the slot holders fetching ranges, the waiters polling
    with the last ticket they were given (as the SDK does), the newcomers."""

    def __init__(self, scheduler: DownloadScheduler, workload: ScaleWorkload) -> None:
        self.scheduler = scheduler
        self.workload = workload
        self.holders: list[_Holder] = []
        self.tickets: dict[int, str] = {}

    async def timed(self, request: DownloadRequest) -> tuple[Decision, float]:
        started = time.perf_counter()
        decision = await self.scheduler.admit(request)
        return decision, time.perf_counter() - started

    async def poll(self, index: int) -> tuple[Decision, float]:
        ticket = self.tickets.get(index)
        decision, seconds = await self.timed(replace(self.workload.request(index), ticket=ticket))
        if isinstance(decision, Queued) and decision.ticket is not None:
            self.tickets[index] = decision.ticket
        elif isinstance(decision, Admitted):
            await self.delivered(decision, self.workload.request(index).byte_range)
            self.holders.append(_Holder(self.workload.request(index), RANGE_BYTES, True))
        return decision, seconds

    async def delivered(self, decision: Admitted, byte_range: ByteRange | None) -> None:
        assert byte_range is not None
        await self.scheduler.report(decision.grant, Delivered(byte_range))

    async def start_holders(self) -> None:
        """On the empty queue, the downloads that hold every slot: 15 of class release,
        then an interactive one for the reserved slot."""
        for number in [*range(1, SESSIONS), 0]:
            request = holder_request(number)
            decision = await self.scheduler.admit(request)
            if not isinstance(decision, Admitted):
                raise RuntimeError(f"slot holder {number} was answered {decision!r}")
            await self.delivered(decision, request.byte_range)
            self.holders.append(_Holder(request, RANGE_BYTES, finishes=number != 0))

    async def fetch(self, holder: _Holder, whole: bool = False) -> tuple[Decision, float]:
        """The holder's next range (the rest of its object when ``whole``), reported."""
        size = holder.request.object_size
        end = size if whole else min(size, holder.offset + RANGE_BYTES)
        request = replace(holder.request, byte_range=ByteRange(holder.offset, end), ticket=None)
        decision, seconds = await self.timed(request)
        if isinstance(decision, Admitted):
            await self.delivered(decision, request.byte_range)
            holder.offset = end
        if holder.offset >= size or not isinstance(decision, Admitted):
            self.holders.remove(holder)  # done, or asked to yield its slot
        return decision, seconds

    async def keep_alive(self, finish_one: bool = False) -> None:
        """Every holder fetches its next range (an idle slot would be released); with
        ``finish_one`` the longest-held release holder fetches the rest and is done."""
        finishing = next((h for h in self.holders if h.finishes), None) if finish_one else None
        for holder in list(self.holders):
            await self.fetch(holder, whole=holder is finishing)

    async def settle(self, step: Step, caught_up: Callable[[], Awaitable[bool]]) -> None:
        """Ticks on the filled queue, the holders fetching, until the store caught up."""
        for number in itertools.count():
            await self.keep_alive()
            await step()
            await self.scheduler.tick()
            if number >= WARMUP and await caught_up():
                return

    async def measure(self, store: str, effort: Effort, step: Step) -> Figures:
        figures = Figures(store)
        waiting = self.workload.waiting
        positions = dict(zip(POSITIONS, (0, waiting // 2, waiting - 1), strict=True))
        # The same waiter at each position polls again and again, the positions in turn,
        # so that a slow spell of the machine falls on all three.
        for sample in range(WARMUP + effort.polls):
            for label, index in positions.items():
                decision, seconds = await self.poll(index)
                if sample < WARMUP:
                    continue
                figures.polls.setdefault(label, []).append(seconds)
                if isinstance(decision, Queued):
                    figures.positions.setdefault(label, []).append(decision.position)
                else:
                    figures.unexpected += 1
        # Newcomers of the CI principals, each joining at the end of the queue unplaced.
        for number in range(WARMUP + effort.newcomers):
            decision, seconds = await self.timed(self.workload.request(waiting + number))
            if number >= WARMUP:
                figures.newcomers.append(seconds)
                wrong = not isinstance(decision, Queued) or decision.position is not None
                figures.unexpected += wrong
        # The next range of an active download, the holders in turn.
        for number in range(effort.ranges):
            decision, seconds = await self.fetch(self.holders[number % len(self.holders)])
            figures.ranges.append(seconds)
            figures.unexpected += not isinstance(decision, Admitted)
        # Ticks: a slot frees before each, and the head of the queue claims it after.
        head = 0
        for number in range(WARMUP + effort.ticks):
            await self.keep_alive(finish_one=True)
            await step()
            started = time.perf_counter()
            await self.scheduler.tick()
            seconds = time.perf_counter() - started
            if number >= WARMUP:
                figures.ticks.append(seconds)
                if isinstance(self.scheduler, PostgresScheduler):
                    figures.unled += not self.scheduler.is_leader
            while head < waiting and isinstance((await self.poll(head))[0], Admitted):
                head += 1
                figures.claims += number >= WARMUP
        return figures


# ====================================================================== the stores
async def measure_memory(workload: ScaleWorkload, effort: Effort) -> Figures:
    """The in-memory store filled through ``admit`` on a ``FakeClock``. The collector is
    off during the fill and the filled queue is frozen out of it (as in ``core_bench``):
    the measured calls run with the collector on, without rescanning the queue."""
    clock = FakeClock()
    scheduler = InMemoryDownloadScheduler(
        scale_settings(), clock=clock, ticket_keys=[generate_key()]
    )

    async def step() -> None:
        clock.advance(STEP)

    async def caught_up() -> bool:
        return True

    clients = Clients(scheduler, workload)
    await clients.start_holders()
    gc.collect()
    gc.disable()
    try:
        await fill_memory(scheduler, clock, workload)
    finally:
        gc.collect()
        gc.freeze()
        gc.enable()
    try:
        await clients.settle(step, caught_up)
        return await clients.measure("in memory", effort, step)
    finally:
        gc.unfreeze()


async def measure_postgres(dsn: str, workload: ScaleWorkload, effort: Effort) -> Figures:
    """PostgreSQL in a throwaway schema, dropped however the size ends; this process is
    the fleet's only node. The queue is filled with ``COPY``, then the leader's ticks
    fold it into place buckets (ADR 0020) before anything is measured."""
    schema = f"arkvory_bench_scale_{secrets.token_hex(4)}"
    conn = await asyncpg.connect(dsn, server_settings={"search_path": schema})
    scheduler: PostgresScheduler | None = None
    next_step = time.monotonic()

    async def step() -> None:
        nonlocal next_step
        next_step = max(next_step + STEP, time.monotonic())
        await asyncio.sleep(next_step - time.monotonic())

    deadline = time.monotonic() + FOLD_TIMEOUT_S
    filled: asyncio.Task[None] | None = None

    async def caught_up() -> bool:
        if time.monotonic() > deadline:
            raise TimeoutError("the leader did not fold the fill in time")
        if filled is None or not filled.done():
            return False
        filled.result()  # the fill's error, if it failed
        return not await conn.fetchval(
            "SELECT EXISTS (SELECT 1 FROM queue_change) "
            "OR EXISTS (SELECT 1 FROM place_bucket WHERE waiting > $1)",
            2 * PLACE_BUCKET,
        )

    try:
        scheduler = await PostgresScheduler.connect(
            dsn, schema=schema, settings=scale_settings(), node_id="pg-scale", pool_size=8
        )
        clients = Clients(scheduler, workload)
        await clients.start_holders()
        started = time.perf_counter()
        # The process ticks and its holders fetch while the queue is filled, as a server
        # does: a node that stopped ticking for the half minute a million rows take would
        # lose its leases, and the holders their slots.
        filled = asyncio.create_task(fill_postgres(conn, workload))
        await clients.settle(step, caught_up)
        # What autovacuum does soon after the fold's deleted changes, so the tick does
        # not walk them.
        await conn.execute("VACUUM (ANALYZE) queue_change, place_bucket")
        log(f"  PostgreSQL: filled and folded in {time.perf_counter() - started:.0f} s")
        return await clients.measure("PostgreSQL", effort, step)
    finally:
        if filled is not None and not filled.done():
            filled.cancel()
            await asyncio.gather(filled, return_exceptions=True)
        if scheduler is not None:
            await scheduler.disconnect()
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await conn.close()


# ====================================================================== the report
@dataclass(slots=True)
class SizeRun:
    waiting: int
    memory: Figures
    postgres: Figures


def _ms(values: Sequence[float], q: float = 0.5) -> float:
    return 1000 * (median(values) if q == 0.5 else quantile(values, q))


def _row(figures: Figures) -> list[float]:
    """The figures of one store's row of the size table, in milliseconds."""
    return [
        *(_ms(figures.polls.get(name, [])) for name in POSITIONS),
        *(_ms(figures.polls.get(name, []), 0.99) for name in POSITIONS),
        *(_ms(figures.newcomers, q) for q in (0.5, 0.99)),
        *(_ms(figures.ranges, q) for q in (0.5, 0.99)),
        *(_ms(figures.ticks, q) for q in (0.5, 0.99)),
    ]


def goal_rows(sizes: Sequence[SizeRun]) -> list[str]:
    low, top = sizes[0], sizes[-1]
    where = f"at {top.waiting:,} waiting"
    pg, memory = _row(top.postgres), _row(top.memory)
    p50s, p99s = pg[0:3], pg[3:6]
    spread, ranges = ratio(p50s[-1], p50s[0]), ratio(pg[8], memory[8])
    rows = [
        "| goal | measured | result |",
        "| --- | --- | --- |",
        f"| poll p50 ≤ {POLL_P50_GOAL_MS:g} ms at the first, middle and last position, {where} "
        f"| {' / '.join(map(format_ms, p50s))} | {verdict(max(p50s) <= POLL_P50_GOAL_MS)} |",
        f"| poll p99 ≤ {POLL_P99_GOAL_MS:g} ms, {where} | {' / '.join(map(format_ms, p99s))} "
        f"| {verdict(max(p99s) <= POLL_P99_GOAL_MS)} |",
        f"| the last position's poll within {LAST_FIRST_GOAL:g}× the first's (p50), {where} "
        f"| {format_ratio(spread)} | {verdict(spread <= LAST_FIRST_GOAL)} |",
        f"| range admission of an active session ≤ {RANGE_GOAL:g}× in memory (median), {where} "
        f"| {format_ratio(ranges)} | {verdict(ranges <= RANGE_GOAL)} |",
        f"| leader's tick after a slot frees, median ≤ {TICK_GOAL_MS:g} ms, {where} "
        f"| {format_ms(pg[10])} | {verdict(pg[10] <= TICK_GOAL_MS)} |",
    ]
    if top.waiting > low.waiting:
        low_pg = _row(low.postgres)
        newcomer, growth = ratio(pg[7], low_pg[7]), ratio(pg[10], low_pg[10])
        allowed = GROWTH_SHARE * top.waiting / low.waiting
        rows += [
            f"| newcomer p99 at {top.waiting:,} ≤ {NEWCOMER_GROWTH_GOAL:g}× at {low.waiting:,} "
            f"| {format_ratio(newcomer)} | {verdict(newcomer <= NEWCOMER_GROWTH_GOAL)} |",
            f"| the tick grows far slower than the queue ({low.waiting:,} → {top.waiting:,}: "
            f"≤ {allowed:.1f}×) | {format_ratio(growth)} | {verdict(growth <= allowed)} |",
        ]
    return rows


def size_rows(sizes: Sequence[SizeRun]) -> list[str]:
    rows = [
        "| waiting | store | poll p50, first / middle / last | poll p99 | newcomer p50 / p99 "
        "| range admission p50 / p99 | tick median / p99 |",
        "| ---: | --- | --- | --- | --- | --- | --- |",
    ]
    for size in sizes:
        pg, memory = _row(size.postgres), _row(size.memory)
        quotient = [ratio(a, b) for a, b in zip(pg, memory, strict=True)]
        for name, values in (("PostgreSQL", pg), ("in memory", memory), ("÷", quotient)):
            cells = [(format_ratio if name == "÷" else format_ms)(x) for x in values]
            shown = "PostgreSQL ÷ in memory" if name == "÷" else name
            rows.append(
                f"| {size.waiting:,} | {shown} | {' / '.join(cells[0:3])} "
                f"| {' / '.join(cells[3:6])} | {' / '.join(cells[6:8])} "
                f"| {' / '.join(cells[8:10])} | {' / '.join(cells[10:12])} |"
            )
    return rows


def problems(sizes: Sequence[SizeRun]) -> list[str]:
    """What makes the figures wrong rather than slow: answers of the wrong kind, a tick
    that did not lead, no slot claimed, a position the store must know exactly that is
    wrong (every one in memory, where the fill's turns are the store's own; the first
    on PostgreSQL, whose places further back are counted by bucket)."""
    found: list[str] = []
    for size in sizes:
        expected = dict(zip(POSITIONS, (1, size.waiting // 2 + 1, size.waiting), strict=True))
        for figures in (size.memory, size.postgres):
            where = f"{figures.store} at {size.waiting:,}"
            if figures.unexpected:
                found.append(f"{where}: {figures.unexpected} answers of the wrong kind")
            if figures.unled:
                found.append(f"{where}: {figures.unled} measured ticks did not lead")
            if not figures.claims:
                found.append(f"{where}: no freed slot was claimed")
            for label, answers in figures.positions.items():
                exact = label == "first" or figures.store == "in memory"
                if exact and any(p != expected[label] for p in answers):
                    found.append(f"{where}: the {label} waiter's position is wrong")
    return found


def heading(sizes: Sequence[int]) -> str:
    """One section per set of sizes, so a run at 65,536 does not replace the million's."""
    names = [f"{size:,}" for size in sizes]
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return f"## PostgreSQL queue length: {listed} waiting"


def render(
    sizes: Sequence[SizeRun], effort: Effort, argv: Sequence[str], server: str, loads: str
) -> str:
    now = datetime.datetime.now(datetime.UTC)
    command = shlex.join(["python", "-m", "benchmarks.pg_scale", *argv])
    claims = ", ".join(f"{s.waiting:,}: {s.postgres.claims}" for s in sizes)
    lines = [
        heading([size.waiting for size in sizes]),
        "",
        f"- Command: `{command}`",
        f"- Machine: {cpu_count()} CPUs, {cpu_model()}, {platform.system()} "
        f"{platform.release()}; PostgreSQL {server} on the same machine; CPython "
        f"{platform.python_version()}, asyncpg {package_version('asyncpg')}",
        f"- Date: {now:%Y-%m-%d %H:%M} UTC; load average before / after: {loads}",
        f"- Workload: 16 slots held, one class (release), 1,000 principals; per store "
        f"{effort.polls} polls per position, {effort.newcomers} newcomers, {effort.ranges} "
        f"range admissions, {effort.ticks} ticks 0.5 s apart, a slot freed before each (slots the "
        f"head claimed on PostgreSQL: {claims}); benchmarks/README.md",
        "",
        *goal_rows(sizes),
        "",
        *size_rows(sizes),
        "",
    ]
    return "\n".join(lines)


# ====================================================================== main
def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def parse_sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(sorted({int(part.replace("_", "")) for part in text.split(",") if part}))
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"sizes are whole numbers: {error}") from error
    if not sizes or any(size < 64 or size > 1_048_576 for size in sizes):
        raise argparse.ArgumentTypeError("sizes are 64 to 1,048,576")
    return sizes


async def server_version(dsn: str) -> str:
    connection = await asyncpg.connect(dsn, timeout=30)
    try:
        found = [str(await connection.fetchval(f"SHOW {name}")) for name in SHOWN]
    finally:
        await connection.close()
    return "{} (shared_buffers {}, synchronous_commit {})".format(*found)


async def run(dsn: str, sizes: Sequence[int], effort: Effort) -> list[SizeRun]:
    found = []
    for size in sizes:
        workload = ScaleWorkload(waiting_for(size))
        log(f"{workload.waiting:,} waiting: in memory …")
        memory = await measure_memory(workload, effort)
        gc.collect()
        log(f"{workload.waiting:,} waiting: PostgreSQL …")
        postgres = await measure_postgres(dsn, workload, effort)
        found.append(SizeRun(workload.waiting, memory, postgres))
    return found


def main(argv: Sequence[str] | None = None) -> int:
    # A run stopped with SIGTERM unwinds through the stores, so its schema is dropped.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.pg_scale",
        description="The PostgreSQL queue at 65,536 and 1,048,576 waiting, beside memory.",
    )
    parser.add_argument("--dsn", help=f"database (default ${DSN_VARIABLE} or {DEFAULT_DSN})")
    parser.add_argument(
        "--sizes", type=parse_sizes, default=(65_536,), help="waiting, comma-separated"
    )
    parser.add_argument("--quick", action="store_true", help="few calls, print only")
    parser.add_argument("--output", type=Path, help="markdown file to update")
    args_list = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(args_list)
    dsn: str = args.dsn or os.environ.get(DSN_VARIABLE) or DEFAULT_DSN
    output: Path | None = args.output or (None if args.quick else RESULTS_PATH)
    effort = QUICK if args.quick else FULL
    try:
        server = asyncio.run(server_version(dsn))
    except (OSError, asyncpg.PostgresError, TimeoutError) as error:
        log(f"PostgreSQL is not reachable at {dsn}: {error}; see benchmarks/README.md")
        return 2
    load_before = load_average()
    sizes = asyncio.run(run(dsn, args.sizes, effort))
    section = render(sizes, effort, args_list, server, f"{load_before}; {load_average()}")
    print(section)
    if output is not None:
        write_section(output, heading([size.waiting for size in sizes]), section)
        log(f"written to {output}")
    found = problems(sizes)
    for problem in found:
        log(f"problem: {problem}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
