"""The shared queue at 65,536 and 1,048,576 waiting: ``PostgresScheduler`` side by side
with ``InMemoryDownloadScheduler`` in the same run.

Run with ``python -m benchmarks.pg_scale`` (65,536 waiting, ``make bench-pg``) or
``--sizes 65536,1048576`` (``make bench-pg-million``, about ten minutes on two CPUs);
``benchmarks/README.md`` explains the workload. Needs a PostgreSQL server
(``$ARKVORY_TEST_DATABASE_URL``, default ``postgresql://postgres@127.0.0.1:5432/test``).

Each size: the in-memory store is filled through ``admit`` on a ``FakeClock`` and
measured; then a throwaway schema is migrated, two server processes start (the leader,
and a server that admits the slot holders and later runs the clients), the parent fills
the queue with ``COPY``, and the server runs the same clients as in memory: polls at the
first, middle and last position, newcomers, range admissions, and the steady churn
during which the leader's ticks are taken. The schema is dropped however the size ends.
How many statements each call sends is not measured here but asserted by
``tests/postgres/test_one_round_trip.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import random
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import asyncpg

from arkvory_sched import InMemoryDownloadScheduler, generate_key
from arkvory_sched.postgres._leader import PLACE_BUCKET
from arkvory_sched.testing import FakeClock
from benchmarks._machine import load_average
from benchmarks._pg import (
    DEFAULT_DSN,
    DSN_VARIABLE,
    exit_on_sigterm,
    log,
    reach_server,
    run_async,
    throwaway_schema,
)
from benchmarks._report import write_section
from benchmarks._scale_driver import NEWCOMER_WARMUP, Driver, MemoryPacer, Plan
from benchmarks._scale_figures import SizeRun, StoreRun
from benchmarks._scale_fill import fill_memory, fill_postgres
from benchmarks._scale_report import ScaleRun, heading, problems, render
from benchmarks._scale_server import LEADER, SERVER, ServerSpec, server_process
from benchmarks._scale_workload import ScaleWorkload, scale_settings, waiting_for

__all__ = ["main"]

RESULTS_PATH: Final = Path(__file__).resolve().parent / "RESULTS.md"
DEFAULT_SIZES: Final = (65_536,)
LARGEST: Final = 1_048_576
SMALLEST: Final = 64
SEED: Final = 17
HEAD_LIST: Final = 256  # waiters the churn's head clients may get to, in service order
FAR_SAMPLES: Final = 200
FILL_TIMEOUT_S: Final = 1_800.0
MEASURE_TIMEOUT_S: Final = 1_800.0


@dataclass(frozen=True, slots=True)
class Effort:
    """How many calls each figure takes: the full run, or ``--quick``."""

    poll_samples: int
    newcomers: int
    range_samples: int
    churn_warmup_steps: int  # before the measured steps: the first no-shows come at 32 s
    churn_steps: int
    settle_seconds: float

    def describe(self) -> str:
        return (
            f"{self.poll_samples} polls per position, {self.newcomers} newcomers, "
            f"{self.range_samples} range admissions, churn {self.churn_warmup_steps} + "
            f"{self.churn_steps} measured steps of 0.5 s"
        )


FULL: Final = Effort(100, 500, 400, 68, 40, 3.0)
QUICK: Final = Effort(15, 30, 40, 2, 6, 0.5)


def make_plan(workload: ScaleWorkload, effort: Effort, seed: int) -> Plan:
    """The downloads the clients use, from the service order of the fill."""
    order = workload.service_order()
    waiting = workload.waiting
    positions: tuple[tuple[str, int, int], ...] = ()
    if waiting:
        middle = waiting // 2
        positions = (
            ("first", order[0], 1),
            ("middle", order[middle], middle + 1),
            ("last", order[-1], waiting),
        )
    newcomers = range(waiting, waiting + NEWCOMER_WARMUP + effort.newcomers)
    heads = (order[:HEAD_LIST] + list(newcomers))[:HEAD_LIST]
    rng = random.Random(seed)
    far: list[int] = []
    if waiting > HEAD_LIST:
        far = [order[rng.randrange(HEAD_LIST, waiting)] for _ in range(FAR_SAMPLES)]
    return Plan(
        waiting=waiting,
        positions=positions,
        poll_samples=effort.poll_samples,
        newcomers=effort.newcomers,
        range_samples=effort.range_samples,
        heads=tuple(heads),
        far=tuple(far),
        churn_warmup_steps=effort.churn_warmup_steps,
        churn_steps=effort.churn_steps,
        settle_seconds=effort.settle_seconds,
    )


# ====================================================================== in memory
async def measure_memory(workload: ScaleWorkload, plan: Plan) -> StoreRun:
    """The same clients against the in-memory store, filled through ``admit``.

    The collector is off during the fill and the filled queue is frozen out of later
    collections (as in ``core_bench``): the measured calls run with the collector on
    but without rescanning a gigabyte of queue.
    """
    clock = FakeClock()
    scheduler = InMemoryDownloadScheduler(
        scale_settings(), clock=clock, ticket_keys=[generate_key()]
    )
    pacer = MemoryPacer(clock.advance, scheduler)
    driver = Driver(scheduler, workload, pacer)
    await driver.start_holders()
    gc.collect()
    gc.disable()
    started = time.perf_counter()
    try:
        await fill_memory(scheduler, clock, workload)
    finally:
        fill_seconds = time.perf_counter() - started
        gc.collect()
        gc.freeze()
        gc.enable()
    try:
        clients = await driver.measure(plan)
    finally:
        gc.unfreeze()
    log(f"  in memory: filled in {fill_seconds:.0f} s")
    return StoreRun("in memory", clients, pacer.ticks)


# ====================================================================== PostgreSQL
async def _prepare(dsn: str, schema: str, workload: ScaleWorkload) -> float:
    """Fill the queue and wait for the leader to fold it; returns the fill's seconds."""
    connection = await asyncpg.connect(dsn, server_settings={"search_path": schema})
    try:
        started = time.perf_counter()
        await fill_postgres(connection, workload)
        await folded(connection)
        return time.perf_counter() - started
    finally:
        await connection.close()


async def folded(conn: asyncpg.Connection) -> None:
    """Wait until the leader has folded the fill into its place buckets (ADR 0020): the
    figures are of the steady state, not of the catch-up after a million inserts."""
    deadline = time.monotonic() + FILL_TIMEOUT_S
    while await conn.fetchval("SELECT EXISTS (SELECT 1 FROM queue_change)"):
        if time.monotonic() > deadline:
            raise TimeoutError("the leader did not fold the fill in time")
        await asyncio.sleep(0.5)
    while await conn.fetchval(
        "SELECT EXISTS (SELECT 1 FROM place_bucket WHERE waiting > $1)", 2 * PLACE_BUCKET
    ):
        if time.monotonic() > deadline:
            raise TimeoutError("the leader did not cut the fill's buckets in time")
        await asyncio.sleep(0.5)
    # What autovacuum does soon after the fill's million deleted changes (the table's
    # own settings start it after 10,000), so the tick does not walk them.
    await conn.execute("VACUUM (ANALYZE) queue_change, place_bucket")


def measure_postgres(dsn: str, workload: ScaleWorkload, plan: Plan, result: SizeRun) -> None:
    with throwaway_schema(dsn, "scale") as schema:

        def spec(role: str) -> ServerSpec:
            return ServerSpec(role, dsn, schema, workload.waiting, plan.settle_seconds)

        with server_process(spec(LEADER)) as leader:
            leader.ready()
            with server_process(spec(SERVER)) as server:
                server.ready()
                seconds = run_async(_prepare(dsn, schema, workload), FILL_TIMEOUT_S)
                log(f"  PostgreSQL: filled in {seconds:.0f} s; the clients run …")
                server.pipe.send(("go", plan))
                served = server.expect("result", MEASURE_TIMEOUT_S)
            leader.pipe.send(("stop", None))
            led = leader.expect("result", 120)
    clients = served.clients
    assert clients is not None
    start, end = clients.churn.window
    ticks = []
    for process in (led, served):
        result.lost_leads += sum(t.lost for t in process.ticks)
        ticks += [t for t in process.ticks if t.led and start <= t.started < end]
    ticks.sort(key=lambda t: t.started)
    result.postgres = StoreRun("PostgreSQL", clients, ticks)


# ====================================================================== sizes
def measure_size(dsn: str, size: int, effort: Effort, seed: int) -> SizeRun:
    workload = ScaleWorkload(waiting_for(size))
    plan = make_plan(workload, effort, seed)
    result = SizeRun(workload.waiting)
    began = time.perf_counter()
    log(f"{workload.waiting:,} waiting: in memory …")
    result.memory = run_async(measure_memory(workload, plan), MEASURE_TIMEOUT_S)
    gc.collect()
    log(f"{workload.waiting:,} waiting: PostgreSQL …")
    measure_postgres(dsn, workload, plan, result)
    result.seconds = time.perf_counter() - began
    return result


def parse_sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(sorted({int(part.replace("_", "")) for part in text.split(",") if part}))
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"sizes are whole numbers: {error}") from error
    if not sizes or any(size < SMALLEST or size > LARGEST for size in sizes):
        raise argparse.ArgumentTypeError(f"sizes are {SMALLEST} to {LARGEST:,}")
    return sizes


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.pg_scale",
        description="The PostgreSQL queue at 65,536 and 1,048,576 waiting, beside the "
        "in-memory queue.",
    )
    parser.add_argument(
        "--dsn", default=None, help=f"database (default ${DSN_VARIABLE} or {DEFAULT_DSN})"
    )
    parser.add_argument(
        "--sizes",
        type=parse_sizes,
        default=DEFAULT_SIZES,
        help="waiting downloads, comma-separated (default 65536; 65536,1048576 for the "
        "million, as make bench-pg-million runs it)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="few calls and a short churn, print only"
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help="markdown file whose section of these sizes is replaced (default "
        "benchmarks/RESULTS.md, none with --quick)",
    )
    parser.add_argument(
        "--seed", type=int, default=SEED, help=f"seed of the far-back waiters (default {SEED})"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, exit_on_sigterm)
    args_list = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(args_list)
    dsn: str = args.dsn or os.environ.get(DSN_VARIABLE) or DEFAULT_DSN
    sizes: tuple[int, ...] = args.sizes
    effort = QUICK if args.quick else FULL
    output: Path | None = args.output or (None if args.quick else RESULTS_PATH)
    run = ScaleRun(effort=effort.describe(), seed=args.seed)
    reached = reach_server(dsn)
    if reached is None:
        return 2
    run.server_version, run.server_settings = reached
    load_before = load_average()
    began = time.perf_counter()
    for size in sizes:
        run.sizes.append(measure_size(dsn, size, effort, args.seed))
    wall = time.perf_counter() - began
    section = render(run, args_list, wall, f"{load_before}; {load_average()}")
    print(section)
    if output is not None:
        write_section(output, heading([s.waiting for s in run.sizes]), section)
        log(f"written to {output}")
    found = problems(run)
    for problem in found:
        log(f"problem: {problem}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
