"""The server processes of ``pg_scale``: two OS processes of one fleet on one schema.

Each is what a server process behind the load balancer is: its own
``PostgresScheduler.connect(...)`` (pool of 8 connections, node id of its own) and its
own tick loop, timed tick by tick. The ``leader`` process starts first, so its first
tick takes the leader lease; it serves no clients, so its ticks are the leader's work.
The ``server`` process admits the slot holders on the empty queue, keeps them fetching
while the parent fills the queue, and then runs the clients' measurements
(:class:`~benchmarks._scale_driver.Driver`) when the parent sends the plan.

Neither process ever holds anything per waiting download (the plan names the few
downloads the clients use), so their memory, reported at the end, shows what the store
itself keeps. Both record every tick with whether it led; the parent takes the ticks
that led in the churn's measured window, whichever process led them.

Messages on the pipe: the child sends ``("ready", node)``, then ``("result",
ServerResult)`` or ``("error", text)``; the parent sends ``("go", Plan)`` to the server
and ``("stop", None)`` to the leader.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any, Final

from arkvory_sched.postgres import PostgresScheduler
from benchmarks._machine import process_memory
from benchmarks._pg_trace import Breakdown, StatementTrace
from benchmarks._scale_driver import Driver, Plan, RealPacer
from benchmarks._scale_figures import ClientFigures, TickSample
from benchmarks._scale_workload import ScaleWorkload, scale_settings
from benchmarks.pg_bench import receive

__all__ = ["LEADER", "SERVER", "ServerResult", "ServerSpec", "run_server", "server_process"]

LEADER: Final = "leader"
SERVER: Final = "server"
POOL_SIZE: Final = 8
LEAD_TIMEOUT_S: Final = 30.0
READY_TIMEOUT_S: Final = 60.0


@dataclass(frozen=True, slots=True)
class ServerSpec:
    role: str
    dsn: str
    schema: str
    waiting: int
    settle_seconds: float


@dataclass(slots=True)
class ServerResult:
    role: str
    node: str
    ticks: list[TickSample] = field(default_factory=list)
    rss: int = 0
    peak_rss: int = 0
    clients: ClientFigures | None = None


def run_server(spec: ServerSpec, pipe: Connection) -> None:
    """Process entry point: serve until the parent is done, then send the result."""
    try:
        result = asyncio.run(_serve(spec, pipe))
    except BaseException as error:  # report instead of leaving the parent waiting
        pipe.send(("error", f"{type(error).__name__}: {error}\n{traceback.format_exc()}"))
    else:
        pipe.send(("result", result))
    finally:
        pipe.close()


async def _serve(spec: ServerSpec, pipe: Connection) -> ServerResult:
    node = f"scale-{spec.role}-{os.getpid()}"
    scheduler = await PostgresScheduler.connect(
        spec.dsn,
        schema=spec.schema,
        settings=scale_settings(),
        node_id=node,
        pool_size=POOL_SIZE,
        migrate=False,
    )
    result = ServerResult(spec.role, node)
    trace = StatementTrace()
    trace.install()
    stop = asyncio.Event()
    ticker = asyncio.create_task(_tick_loop(scheduler, stop, result.ticks, trace))
    try:
        if spec.role == LEADER:
            await _until_leading(scheduler)
            pipe.send(("ready", node))
            await asyncio.to_thread(pipe.recv)
        else:
            result.clients = await _run_clients(spec, scheduler, pipe, node, trace)
    finally:
        stop.set()
        await ticker
        trace.uninstall()
    result.rss, result.peak_rss = process_memory()
    await scheduler.disconnect()
    return result


async def _run_clients(
    spec: ServerSpec,
    scheduler: PostgresScheduler,
    pipe: Connection,
    node: str,
    trace: StatementTrace,
) -> ClientFigures:
    pacer = RealPacer(spec.settle_seconds)
    driver = Driver(scheduler, ScaleWorkload(spec.waiting), pacer, trace)
    await driver.start_holders()
    async with pacer.quiet(driver):  # the holders keep fetching during the fill
        pipe.send(("ready", node))
        _, plan = await asyncio.to_thread(pipe.recv)
    assert isinstance(plan, Plan)
    return await driver.measure(plan)


async def _tick_loop(
    scheduler: PostgresScheduler,
    stop: asyncio.Event,
    ticks: list[TickSample],
    trace: StatementTrace,
) -> None:
    """The tick every server process runs (as the middleware's lifespan does), timed,
    with the time of each statement it sent (where a slow tick spends it)."""
    while not stop.is_set():
        statements = Breakdown()
        leading = scheduler.is_leader
        began, started = time.monotonic(), time.perf_counter()
        with trace.recording(statements):
            report = await scheduler.tick()
        elapsed = time.perf_counter() - started
        # A tick that fails (database trouble) steps down: it was still the leader's.
        led = leading or scheduler.is_leader
        sample = TickSample(began, elapsed, led, report.marked, report.expired)
        sample.statements = dict(statements.ms)
        sample.lost = leading and not scheduler.is_leader
        ticks.append(sample)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), report.next_tick_in)


async def _until_leading(scheduler: PostgresScheduler) -> None:
    deadline = time.monotonic() + LEAD_TIMEOUT_S
    while not scheduler.is_leader:
        if time.monotonic() > deadline:
            raise RuntimeError("the leader process did not take the leader lease")
        await asyncio.sleep(0.05)


@dataclass(slots=True)
class ServerHandle:
    """A started server process and the parent's end of its pipe."""

    process: Any
    pipe: Connection

    def ready(self) -> str:
        return str(self.expect("ready", READY_TIMEOUT_S))

    def expect(self, kind: str, timeout: float) -> Any:
        answer, payload = receive(self.pipe, self.process, timeout)
        if answer == "error":
            raise RuntimeError(f"server process {self.process.pid}: {payload}")
        if answer != kind:
            raise RuntimeError(f"server process {self.process.pid} sent {answer!r}")
        return payload


@contextlib.contextmanager
def server_process(spec: ServerSpec) -> Iterator[ServerHandle]:
    """Start one server process (``spawn``: a fresh interpreter, as a server would be);
    killed at the end if it is still running."""
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    process = context.Process(target=run_server, args=(spec, child), daemon=True)
    process.start()
    child.close()
    try:
        yield ServerHandle(process, parent)
        process.join(30)
    finally:
        parent.close()
        if process.is_alive():
            process.kill()
            process.join(5)
