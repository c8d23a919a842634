"""Polls against one PostgreSQL primary shared by three server processes (issue #26,
points 4 and 5; ``make bench-pg-polls``, benchmarks/README.md).

Figure 1, the poll storm: 1,000 waiters that poll at their ``checkAt`` and 200 that
poll 20 times a second in alternate blocks (and at their ``checkAt`` in the others),
so the queue and the on-time load are the same with and without the storm. Early polls
are answered by the process from the last answer it gave (ADR 0029); the figure is
what the storm still costs: statements, and the well-behaved polls' latency.

Figure 2, the capacity of one primary: about a million waiting, polls with valid
tickets spread over the queue plus newcomers, offered open loop at rising rates until
the fleet no longer answers what is offered; the figure is the highest rate whose
answers' p99 stayed under 5 ms.

Each figure runs in a throwaway schema with three ``spawn`` processes, each a
``PostgresScheduler`` with its own node id, tick loop and clients (``_pg_polls_node``);
real clocks, so one of them leads. A figure that fails (the machine's other test runs
sometimes restart PostgreSQL) is run once more.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import secrets
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any, Final, TypeVar

import asyncpg

from arkvory_sched import StoreUnavailableError, generate_key
from arkvory_sched.policy import PLACE_BUCKET
from arkvory_sched.postgres._boundary import DRIVER_ERRORS
from arkvory_sched.postgres._migrate import apply_migrations
from benchmarks._machine import load_average
from benchmarks._pg_polls_node import NodePlan, Period, StepJob, StormJob, serve
from benchmarks._pg_polls_report import (
    CapacityRun,
    Database,
    Step,
    StormRun,
    capacity_rows,
    merge,
    problems,
    storm_rows,
)
from benchmarks._report import header, write_section
from benchmarks.pg_scale import (
    DEFAULT_DSN,
    DSN_VARIABLE,
    QUEUE_LIMIT,
    ScaleWorkload,
    fill_postgres,
    log,
    server_version,
)

NODES: Final = 3
APPLICATION: Final = "arkvory_bench_polls"  # names the benchmark's backends
NEWCOMER_ROOM: Final = 16_384  # newcomers leave as no-shows ~32 s after they came
POLLS_PER_NEWCOMER: Final = 10
START_S: Final = 1.0  # from sending a job to its start: the pipes, the processes
READY_TIMEOUT_S: Final = 120.0
FOLD_TIMEOUT_S: Final = 1_800.0
CLOCK_TICKS: Final = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True, slots=True)
class Effort:
    """How long and how large each figure is: the full run, or ``--quick``."""

    waiters: int  # figure 1, the fleet's
    stormers: int
    warmup_s: float
    block_s: float
    blocks: int  # alternately without and with the storm
    waiting: int  # figure 2
    settle_s: float  # offered but not measured, before each step
    step_s: float
    rates: tuple[int, ...]  # the fleet's polls per second, step by step


FULL: Final = Effort(
    waiters=1_000,
    stormers=200,
    warmup_s=20.0,
    block_s=15.0,
    blocks=8,
    waiting=QUEUE_LIMIT - NEWCOMER_ROOM,
    settle_s=3.0,
    step_s=15.0,
    rates=(200, 400, 800, 1_200, 1_600, 2_000, 2_400, 3_200, 4_000),
)
QUICK: Final = Effort(
    waiters=300,
    stormers=60,
    warmup_s=8.0,
    block_s=8.0,
    blocks=2,
    waiting=65_536,
    settle_s=2.0,
    step_s=5.0,
    rates=(200, 400, 800),
)


class NodeError(RuntimeError):
    """A node failed or went silent: the figure is run once more."""


RETRIED: Final[tuple[type[BaseException], ...]] = (NodeError, StoreUnavailableError, *DRIVER_ERRORS)


# ====================================================================== the database
@asynccontextmanager
async def throwaway_schema(dsn: str) -> AsyncIterator[tuple[str, asyncpg.Connection]]:
    """A migrated schema of its own and a connection to it, dropped however it ends
    (through a new connection: the old one may have died with the server)."""
    schema = f"arkvory_bench_polls_{secrets.token_hex(4)}"
    conn = await asyncpg.connect(dsn, server_settings={"search_path": schema})
    try:
        await apply_migrations(conn, schema=schema)
        yield schema, conn
    finally:
        with suppress(*DRIVER_ERRORS):
            await conn.close()
        with suppress(*DRIVER_ERRORS):
            dropping = await asyncpg.connect(dsn, timeout=30)
            try:
                await dropping.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            finally:
                await dropping.close()


def postgres_cpu() -> dict[int, float]:
    """CPU seconds (user + system) of every ``postgres`` process, by pid."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "comm").read_text().strip() != "postgres":
                continue
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue  # gone meanwhile
        found[int(entry.name)] = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return found


@dataclass(frozen=True, slots=True)
class _Sample:
    cpu: dict[int, float]
    ours: frozenset[int]
    transactions: int


async def _sample(conn: asyncpg.Connection) -> _Sample:
    ours = await conn.fetch(
        "SELECT pid FROM pg_stat_activity WHERE application_name = $1", APPLICATION
    )
    transactions = await conn.fetchval(
        "SELECT xact_commit + xact_rollback FROM pg_stat_database "
        "WHERE datname = current_database()"
    )
    return _Sample(postgres_cpu(), frozenset(row["pid"] for row in ours), int(transactions))


async def observe(
    conn: asyncpg.Connection, periods: Sequence[tuple[float, float]]
) -> list[Database]:
    """The database over each period, sampled by this (otherwise idle) process."""
    found = []
    for begin, end in periods:
        await asyncio.sleep(max(0.0, begin - time.time()))
        first = await _sample(conn)
        await asyncio.sleep(max(0.0, end - time.time()))
        last = await _sample(conn)
        used = {pid: seconds - first.cpu.get(pid, 0.0) for pid, seconds in last.cpu.items()}
        found.append(
            Database(
                ours=sum(used.get(pid, 0.0) for pid in last.ours | first.ours),
                server=sum(used.values()),
                transactions=last.transactions - first.transactions,
                load=os.getloadavg()[0],
            )
        )
    return found


# ====================================================================== the fleet
def node_dsn(dsn: str) -> str:
    """The DSN with the benchmark's ``application_name``, so its backends can be told
    from those of other work on the same server."""
    return f"{dsn}{'&' if '?' in dsn else '?'}application_name={APPLICATION}"


@asynccontextmanager
async def fleet(
    dsn: str, schema: str, key: bytes
) -> AsyncIterator[Callable[[Any], Awaitable[list[list[Period]]]]]:
    """Three server processes, ready (node 0's holders hold both slots); yields the
    function that runs one job on all of them. The processes are ended on the way out."""
    context = multiprocessing.get_context("spawn")
    pipes, processes = [], []
    for node in range(NODES):
        plan = NodePlan(node_dsn(dsn), schema, key, node, NODES, QUEUE_LIMIT)
        ours, theirs = context.Pipe()
        process = context.Process(target=serve, args=(plan, theirs), name=f"pg-polls-{node}")
        process.start()
        theirs.close()
        pipes.append(ours)
        processes.append(process)

    async def receive(pipe: Any, timeout: float) -> Any:
        if not await asyncio.to_thread(pipe.poll, timeout):
            raise NodeError(f"a node sent nothing for {timeout:.0f} s")
        try:
            status, value = pipe.recv()
        except EOFError as error:
            raise NodeError("a node ended") from error
        if status == "error":
            raise NodeError(value)
        return value

    async def run(job: Any) -> list[list[Period]]:
        periods = job.periods if isinstance(job, StormJob) else (job.period,)
        for pipe in pipes:
            pipe.send(job)
        timeout = periods[-1][1] - time.time() + 60.0
        return [await receive(pipe, timeout) for pipe in pipes]

    try:
        for pipe in pipes:  # no job before every node is ready and the holders hold
            await receive(pipe, READY_TIMEOUT_S)
        yield run
    finally:
        for pipe in pipes:
            with suppress(OSError):
                pipe.send(None)
        for process in processes:
            await asyncio.to_thread(process.join, 30.0)
            if process.is_alive():
                process.terminate()
                await asyncio.to_thread(process.join, 10.0)


# ====================================================================== figure 1
async def storm_figure(dsn: str, effort: Effort) -> StormRun:
    """The same waiters with and without the storm, blocks alternating."""
    async with throwaway_schema(dsn) as (schema, conn), fleet(dsn, schema, generate_key()) as run:
        start = time.time() + START_S
        measured = start + effort.warmup_s
        periods = tuple(
            (measured + n * effort.block_s, measured + (n + 1) * effort.block_s)
            for n in range(effort.blocks)
        )
        storm = frozenset(range(1, effort.blocks, 2))
        clients = effort.waiters + effort.stormers
        job = StormJob(
            periods,
            storm,
            arrive_from=start,
            arrive_by=start + min(5.0, effort.warmup_s / 2),
            clients=clients,
            storm_every=clients // effort.stormers,
        )
        log(
            f"figure 1: {effort.waiters:,} waiters, {effort.stormers} storming, "
            f"{effort.blocks} blocks of {effort.block_s:g} s …"
        )
        nodes, database = await asyncio.gather(run(job), observe(conn, periods))
    blocks = [merge([node[n] for node in nodes]) for n in range(len(periods))]
    stormers = len(range(0, clients, job.storm_every))
    return StormRun(blocks, database, storm, effort.block_s, clients - stormers, stormers)


# ====================================================================== figure 2
async def folded(conn: asyncpg.Connection) -> bool:
    """The leader has folded the fill into place buckets (as ``pg_scale`` waits for)."""
    return not await conn.fetchval(
        "SELECT EXISTS (SELECT 1 FROM queue_change) "
        "OR EXISTS (SELECT 1 FROM place_bucket WHERE waiting > $1)",
        2 * PLACE_BUCKET,
    )


async def capacity_figure(dsn: str, effort: Effort) -> CapacityRun:
    """Fill, let the leader fold, then offer rising rates until the fleet no longer answers
    what is offered. Steps go on past the first p99 over the goal: a step spoiled by the
    machine's other work does not end the figure, and the throughput is shown too."""
    workload = ScaleWorkload(effort.waiting)
    async with throwaway_schema(dsn) as (schema, conn), fleet(dsn, schema, generate_key()) as run:
        log(f"figure 2: filling {workload.waiting:,} waiting …")
        started = time.perf_counter()
        # The processes tick and the holders fetch meanwhile, as servers would.
        await fill_postgres(conn, workload)
        fill_s = time.perf_counter() - started
        deadline = time.monotonic() + FOLD_TIMEOUT_S
        while not await folded(conn):
            if time.monotonic() > deadline:
                raise TimeoutError("the leader did not fold the fill in time")
            await asyncio.sleep(1.0)
        fold_s = time.perf_counter() - started - fill_s
        await conn.execute("VACUUM (ANALYZE) queue_change, place_bucket")
        started = time.perf_counter()
        await conn.execute("ANALYZE download_session")
        found = CapacityRun(workload.waiting, fill_s, fold_s, time.perf_counter() - started)
        log(
            f"  filled in {fill_s:.0f} s, folded in {fold_s:.0f} s, ANALYZE {found.analyze_s:.2f} s"
        )
        for rate in effort.rates:
            begin = time.time() + START_S + effort.settle_s
            period = (begin, begin + effort.step_s)
            job = StepJob(
                period, begin - effort.settle_s, rate, POLLS_PER_NEWCOMER, workload.waiting
            )
            nodes, database = await asyncio.gather(run(job), observe(conn, [period]))
            step = Step(
                rate, POLLS_PER_NEWCOMER, effort.step_s, merge([n[0] for n in nodes]), database[0]
            )
            found.steps.append(step)
            log(f"  {rate:,}/s: {'holds' if step.holds() else 'does not hold'}")
            if not step.keeps_up():
                break  # beyond this the offer only piles up
    return found


# ====================================================================== main
Result = TypeVar("Result", StormRun, CapacityRun)


async def _started_at(dsn: str) -> Any:
    conn = await asyncpg.connect(dsn, timeout=30)
    try:
        return await conn.fetchval("SELECT pg_postmaster_start_time()")
    finally:
        await conn.close()


def twice(
    figure: Callable[[str, Effort], Coroutine[Any, Any, Result]], dsn: str, effort: Effort
) -> Result:
    """The figure, run once more when it failed or PostgreSQL restarted meanwhile (other
    test runs on the machine restart it): its answers would be the outage's."""
    for attempt in (1, 2):
        try:
            started = asyncio.run(_started_at(dsn))
            result = asyncio.run(figure(dsn, effort))
            if asyncio.run(_started_at(dsn)) == started:
                return result
            problem = "PostgreSQL restarted meanwhile"
        except RETRIED as error:
            if attempt == 2:
                raise
            problem = str(error)
        log(f"{figure.__name__}: {problem}; running it once more")
        time.sleep(5.0)
    return result  # restarted twice: the second run's figures, with its errors


def render(
    storm: StormRun | None,
    capacity: CapacityRun | None,
    argv: Sequence[str],
    server: str,
    load_before: str,
) -> str:
    lines = [
        "## PostgreSQL polls: the storm and one primary's capacity",
        "",
        *header(
            "pg_polls",
            argv,
            f"asyncpg {version('asyncpg')}; PostgreSQL {server} on the same machine",
            load_before,
        ),
        "- Three server processes (`PostgresScheduler`, real clocks, ticking every 0.5 s) "
        "on one schema, clients calling `admit` in each; two slots held by 64 GiB downloads, "
        "so nobody is admitted; statements counted in each process where asyncpg sends them "
        "(`BEGIN`/`COMMIT` included); benchmarks/README.md",
    ]
    if storm is not None:
        lines += ["", "### 1. The poll storm (issue #26, point 4)", "", *storm_rows(storm)]
    if capacity is not None:
        lines += [
            "",
            "### 2. One primary's capacity (issue #26, point 5)",
            "",
            *capacity_rows(capacity),
        ]
    return "\n".join([*lines, ""])


def main(argv: Sequence[str] | None = None) -> int:
    # A run stopped with SIGTERM unwinds, so its schema is dropped and its nodes ended.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    parser = argparse.ArgumentParser(prog="python -m benchmarks.pg_polls")
    parser.add_argument("--quick", action="store_true", help="small and short, print only")
    parser.add_argument("--figures", default="1,2", help="which figures, comma-separated")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    dsn = os.environ.get(DSN_VARIABLE) or DEFAULT_DSN
    effort = QUICK if args.quick else FULL
    figures = set(args.figures.split(","))
    try:
        server = asyncio.run(server_version(dsn))
    except (OSError, asyncpg.PostgresError, TimeoutError) as error:
        log(f"PostgreSQL is not reachable at {dsn}: {error}; see benchmarks/README.md")
        return 2
    load_before = load_average()
    storm = twice(storm_figure, dsn, effort) if "1" in figures else None
    capacity = twice(capacity_figure, dsn, effort) if "2" in figures else None
    section = render(storm, capacity, argv, server, load_before)
    print(section)
    if not args.quick and figures == {"1", "2"}:
        write_section(section)
    found = problems(storm, capacity)
    for problem in found:
        log(f"problem: {problem}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
