"""The shared queue at 65,536 and 1,048,576 waiting: ``PostgresScheduler`` beside
``InMemoryDownloadScheduler`` in the same run, because absolute times on a shared machine
move with its load (``make bench-pg``, ``make bench-pg-million``; benchmarks/README.md).

The waiting downloads, in arrival order, belong to up to 1,000 CI principals taking
turns, all of class ``release``; a principal's k-th download gets round-robin turn k, so
download ``index`` waits at position ``index + 1``. Everything is a function of the index:
nothing is kept per download outside the stores. PostgreSQL is filled with one ``COPY``
of the rows ``admit_session`` writes, the in-memory store through ``admit``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import math
import os
import re
import secrets
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from importlib.metadata import version
from statistics import median
from typing import Any, Final

import asyncpg

from arkvory_sched import (
    Admitted,
    ByteRange,
    Decision,
    Delivered,
    DownloadClass,
    DownloadRequest,
    DownloadScheduler,
    InMemoryDownloadScheduler,
    PrincipalKind,
    Queued,
    SchedulerSettings,
    generate_key,
)
from arkvory_sched._session_keys import session_key
from arkvory_sched.policy import PLACE_BUCKET
from arkvory_sched.postgres import PostgresScheduler
from arkvory_sched.postgres import _sql as sql
from arkvory_sched.testing import FakeClock
from benchmarks._machine import load_average
from benchmarks._report import header, quantile, verdict, write_section

DEFAULT_DSN: Final = "postgresql://postgres@127.0.0.1:5432/test"
DSN_VARIABLE: Final = "ARKVORY_TEST_DATABASE_URL"
STEP: Final = 0.5  # seconds between ticks, the production interval
WARMUP: Final = 4  # calls (or ticks) of each kind before the measured ones
FOLD_TIMEOUT_S: Final = 1_800.0
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

MIB: Final = 1024 * 1024
GIB: Final = 1024 * MIB
QUEUE_LIMIT: Final = 1_048_576  # the largest queue_limit the settings accept
HEADROOM: Final = 576  # places left for the slot holders and the newcomers
SESSIONS: Final = 16  # slots: 15 for release, 1 reserved for interactive
PRINCIPALS: Final = 1_000
RANGE_BYTES: Final = MIB  # what an active download fetches per call
HOLDER_BYTES: Final = 64 * GIB  # a slot holder's object: never done by itself
RANK: Final = DownloadClass.RELEASE.rank
SHARDS: Final = 16  # queue_admitted rows (migration 0004): first key byte modulo 16
CHECK_PERIOD: Final = 300.0  # arrivals spread over 300 s; far-back waiters come back after it
# The waiters' own polls (N/300 per second) are not replayed, so their no-show deadlines
# are moved beyond the run.
DEADLINE_HORIZON: Final = 3600.0
GOLDEN: Final = 0.618_033_988_75  # spreads the last polls evenly over the period


@dataclass(frozen=True, slots=True)
class Effort:
    """How many calls each figure takes: the full run, or ``--quick``."""

    polls: int  # per position
    newcomers: int
    ranges: int
    ticks: int


FULL: Final = Effort(polls=100, newcomers=500, ranges=400, ticks=40)
QUICK: Final = Effort(polls=15, newcomers=30, ranges=40, ticks=6)


# ====================================================================== the queue
def scale_settings() -> SchedulerSettings:
    """The same settings for every size and both stores (ordered, tickets on)."""
    return SchedulerSettings(sessions=SESSIONS, queue_limit=QUEUE_LIMIT, queue_per_principal=4_096)


def waiting_for(size: int) -> int:
    """The queue limit counts the slot holders and the newcomers too, so the largest
    queue keeps ``HEADROOM`` places free."""
    return min(size, QUEUE_LIMIT - HEADROOM)


@dataclass(frozen=True, slots=True)
class ScaleWorkload:
    """Download ``index`` -> its principal, round-robin turn and request."""

    waiting: int

    @property
    def principals(self) -> int:
        return min(PRINCIPALS, self.waiting)

    def principal(self, index: int) -> str:
        return f"ci-{index % self.principals}"

    def turn(self, index: int) -> int:
        """The principal's k-th download (k = 1, 2, …), newcomers continuing the count."""
        return index // self.principals + 1

    def request(self, index: int) -> DownloadRequest:
        size = GIB + (index * 2_654_435_761) % (3 * GIB)  # 1 to 4 GiB, hashed
        return DownloadRequest(
            principal=self.principal(index),
            principal_kind=PrincipalKind.SERVICE,
            object_id=f"artifact-{index % 8192}",
            object_size=size,
            byte_range=ByteRange(0, RANGE_BYTES),
            download_id=f"dl-{index:x}",
        )

    def principal_counts(self) -> Iterator[tuple[str, int]]:
        """(principal, its waiting downloads); a principal's last turn is its count."""
        whole, rest = divmod(self.waiting, self.principals)
        for number in range(self.principals):
            yield f"ci-{number}", whole + (number < rest)


def holder_request(number: int) -> DownloadRequest:
    """A slot holder, admitted on the empty queue: ``number`` 0 is interactive (the
    reserved slot), the others release; each downloads a 64 GiB object of its own."""
    return DownloadRequest(
        principal=f"holder-{number}",
        principal_kind=PrincipalKind.PERSON if number == 0 else PrincipalKind.SERVICE,
        object_id=f"holder-object-{number}",
        object_size=HOLDER_BYTES,
        byte_range=ByteRange(0, RANGE_BYTES),
        download_id=f"holder-{number}",
    )


# The columns INSERT_SESSION writes, read from the statement so that a column the
# admission starts to write cannot be missing from the fill; then those of the first
# poll's estimate (R-EST-4).
_INSERTED = re.search(r"INSERT INTO download_session \(([^)]*)\)", sql.INSERT_SESSION)
assert _INSERTED is not None
SESSION_COLUMNS: Final = (
    *(name.strip() for name in _INSERTED[1].split(",")),
    "first_estimate",
    "first_estimate_at",
)


def session_row(
    workload: ScaleWorkload, index: int, now: float, virtual_time: int, wall_offset: float
) -> tuple[Any, ...]:
    """``download_session``'s row of waiting download ``index`` (``SESSION_COLUMNS``).

    Arrivals are spread evenly over the 300 s before queue time ``now``; the last poll
    of each, spread over the same 300 s (never before its arrival), told it to come back
    300 s later. The order key is the turn after the class's round ``virtual_time``;
    ``wall_offset`` is wall time minus queue time (a ticket's arrival is wall time).
    """
    request = workload.request(index)
    arrival = now - CHECK_PERIOD + CHECK_PERIOD * index / workload.waiting
    polled = max(arrival, now - CHECK_PERIOD * ((index * GOLDEN) % 1.0))
    check_at = polled + CHECK_PERIOD
    key = session_key(
        request.principal, request.object_id, request.download_id, request.client_address
    )
    order_key = float(virtual_time + workload.turn(index))
    wall_ms = math.floor((arrival + wall_offset) * 1000)
    return (
        *(key, request.principal, RANK, RANK, True, request.object_size, 0),
        *(arrival, wall_ms, order_key, arrival, None, arrival, check_at),
        check_at + CHECK_PERIOD + DEADLINE_HORIZON,  # no_show_at
        polled,  # last_activity
        now + DEADLINE_HORIZON,  # first_estimate
        polled,  # first_estimate_at: its one poll made the first estimate
    )


async def fill_postgres(conn: asyncpg.Connection, workload: ScaleWorkload) -> None:
    """Write the waiting downloads and the counts an admission keeps (``principal_round``,
    ``principal_load``, the ``queue_admitted`` shards) in one transaction, then do what
    autovacuum does soon after a bulk insert. The fill's principals must be new to the
    queue: one that already had turns would take later ones, so a clash fails the fill
    (unique violation) rather than write a wrong order."""
    shards = [0] * SHARDS

    def rows(now: float, virtual_time: int) -> Iterator[tuple[Any, ...]]:
        """One row at a time, as ``COPY`` asks (a million at once would take a GiB)."""
        offset = time.time() - now
        for index in range(workload.waiting):
            row = session_row(workload, index, now, virtual_time, offset)
            shards[row[0][0] % SHARDS] += 1
            yield row

    async with conn.transaction():
        now = float(await conn.fetchval("SELECT extract(epoch FROM clock_timestamp())::float8"))
        virtual_time = int(
            await conn.fetchval("SELECT virtual_time FROM class_state WHERE queue_rank = $1", RANK)
        )
        await conn.copy_records_to_table(
            "download_session", records=rows(now, virtual_time), columns=list(SESSION_COLUMNS)
        )
        await conn.copy_records_to_table(
            "principal_round",
            records=((RANK, who, virtual_time + n) for who, n in workload.principal_counts()),
            columns=["queue_rank", "principal", "last_tag"],
        )
        await conn.copy_records_to_table(
            "principal_load", records=workload.principal_counts(), columns=["principal", "sessions"]
        )
        await conn.execute(
            "UPDATE queue_admitted AS a SET sessions = a.sessions + f.added "
            "FROM unnest($1::smallint[], $2::bigint[]) AS f(shard, added) WHERE a.shard = f.shard",
            list(range(SHARDS)),
            shards,
        )
    await conn.execute(
        "VACUUM (ANALYZE) download_session, principal_round, principal_load, queue_admitted"
    )
    await check_fill(conn, workload)


async def check_fill(conn: asyncpg.Connection, workload: ScaleWorkload) -> None:
    """Fail unless the store's counts and turns agree with the rows: the waiting count,
    the fleet's session count (``queue_admitted`` − gone), every principal's count
    (``principal_load`` − gone) and every waiter's turn within its principal's."""
    waiting = await conn.fetchval("SELECT count(*) FROM download_session WHERE state = 0")
    sessions = await conn.fetchval("SELECT count(*) FROM download_session")
    counted = await conn.fetchval("SELECT queue_admitted_total() - queue_gone()")
    wrong_loads = await conn.fetchval(
        "WITH held AS (SELECT principal, count(*) AS n FROM download_session GROUP BY principal) "
        "SELECT count(*) FROM principal_load AS l FULL JOIN held AS h USING (principal) "
        "WHERE coalesce(l.sessions, 0) - principal_gone(principal) <> coalesce(h.n, 0)"
    )
    beyond_turns = await conn.fetchval(
        "SELECT count(*) FROM download_session AS d LEFT JOIN principal_round AS r "
        "ON r.queue_rank = d.queue_rank AND r.principal = d.principal "
        "WHERE d.state = 0 AND (r.last_tag IS NULL OR d.order_key > r.last_tag)"
    )
    problems = []
    if waiting < workload.waiting:
        problems.append(f"{waiting:,} waiting, {workload.waiting:,} written")
    if counted != sessions:
        problems.append(f"the fleet's count says {counted:,} sessions, the table {sessions:,}")
    if wrong_loads:
        problems.append(f"{wrong_loads:,} principals counted wrong in principal_load")
    if beyond_turns:
        problems.append(f"{beyond_turns:,} waiters beyond their principal's last turn")
    if problems:
        raise RuntimeError("the filled queue is inconsistent: " + "; ".join(problems))


async def fill_memory(
    scheduler: InMemoryDownloadScheduler, clock: FakeClock, workload: ScaleWorkload
) -> None:
    """The same downloads through ``admit``, arriving over 300 s of ``clock`` in index
    order, then each polling once (no tick meanwhile, so nobody expires in between)."""
    gap = CHECK_PERIOD / workload.waiting
    for index in range(workload.waiting):
        clock.advance(gap)
        decision = await scheduler.admit(workload.request(index))
        if not isinstance(decision, Queued):
            raise RuntimeError(f"in-memory fill: download {index} answered {decision!r}")
    for index in range(workload.waiting):
        decision = await scheduler.admit(workload.request(index))
        if not isinstance(decision, Queued) or decision.position is None:
            raise RuntimeError(f"in-memory fill: the poll of {index} answered {decision!r}")


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
        # Newcomers of the CI principals, each joining at the end of the queue.
        for number in range(WARMUP + effort.newcomers):
            decision, seconds = await self.timed(self.workload.request(waiting + number))
            if number >= WARMUP:
                figures.newcomers.append(seconds)
                # Queued, placed in memory and not yet on PostgreSQL (ADR 0017, point 5).
                figures.unexpected += not isinstance(decision, Queued)
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


def format_ms(value: float) -> str:
    return f"{value * 1000:.1f} µs" if value < 0.1 else f"{value:.2f} ms"


def format_ratio(value: float) -> str:
    return f"{value:,.0f}×" if value >= 100 else f"{value:.2g}×" if value < 1 else f"{value:.1f}×"


def _ms(values: Sequence[float], q: float = 0.5) -> float:
    return 1000 * (median(values) if q == 0.5 else quantile(values, q))


def _row(figures: Figures) -> list[float]:
    """One store's row of the size table in milliseconds: poll p50 at each position, poll
    p99 at each, then newcomer, range admission and tick, each p50 and p99."""
    return [
        *(_ms(figures.polls[name]) for name in POSITIONS),
        *(_ms(figures.polls[name], 0.99) for name in POSITIONS),
        *(_ms(figures.newcomers, q) for q in (0.5, 0.99)),
        *(_ms(figures.ranges, q) for q in (0.5, 0.99)),
        *(_ms(figures.ticks, q) for q in (0.5, 0.99)),
    ]


def goal_rows(sizes: Sequence[SizeRun]) -> list[str]:
    low, top = sizes[0], sizes[-1]
    where = f"at {top.waiting:,} waiting"
    pg, memory = _row(top.postgres), _row(top.memory)
    p50s, p99s = pg[0:3], pg[3:6]
    spread, ranges = p50s[-1] / p50s[0], pg[8] / memory[8]
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
        newcomer, growth = pg[7] / low_pg[7], pg[10] / low_pg[10]
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
        quotient = [a / b for a, b in zip(pg, memory, strict=True)]
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
    sizes: Sequence[SizeRun], effort: Effort, argv: Sequence[str], server: str, load_before: str
) -> str:
    claims = ", ".join(f"{s.waiting:,}: {s.postgres.claims}" for s in sizes)
    software = f"asyncpg {version('asyncpg')}; PostgreSQL {server} on the same machine"
    lines = [
        heading([size.waiting for size in sizes]),
        "",
        *header("pg_scale", argv, software, load_before),
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


def parse_sizes(text: str) -> list[int]:
    return sorted({int(part) for part in text.split(",")})


async def server_version(dsn: str) -> str:
    connection = await asyncpg.connect(dsn, timeout=30)
    try:
        names = ("server_version", "shared_buffers", "synchronous_commit")
        found = [str(await connection.fetchval(f"SHOW {name}")) for name in names]
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
    parser = argparse.ArgumentParser(prog="python -m benchmarks.pg_scale")
    parser.add_argument(
        "--sizes", type=parse_sizes, default=[65_536], help="waiting, comma-separated"
    )
    parser.add_argument("--quick", action="store_true", help="few calls, print only")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    dsn = os.environ.get(DSN_VARIABLE) or DEFAULT_DSN
    effort = QUICK if args.quick else FULL
    try:
        server = asyncio.run(server_version(dsn))
    except (OSError, asyncpg.PostgresError, TimeoutError) as error:
        log(f"PostgreSQL is not reachable at {dsn}: {error}; see benchmarks/README.md")
        return 2
    load_before = load_average()
    sizes = asyncio.run(run(dsn, args.sizes, effort))
    section = render(sizes, effort, argv, server, load_before)
    print(section)
    if not args.quick:
        write_section(section)
    found = problems(sizes)
    for problem in found:
        log(f"problem: {problem}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
