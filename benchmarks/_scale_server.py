"""The server processes of ``pg_scale``: two OS processes of one fleet on one schema.

Each is what a server process behind the load balancer is: its own
``PostgresScheduler.connect(...)`` (pool of 8 connections, node id of its own) and its
own tick loop, timed tick by tick. The ``leader`` process starts first, so its first
tick takes the leader lease; it serves no clients, so its ticks are the leader's work.
The ``server`` process admits the slot holders on the empty queue, keeps them fetching
while the parent fills the queue, and then runs the clients' measurements
(:class:`~benchmarks._scale_driver.Driver`) when the parent sends the plan.

Neither process holds anything per waiting download (the plan names the few downloads
the clients use). Both record every tick with whether it led; the parent takes the ticks
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
from benchmarks._scale_driver import Driver, Plan, RealPacer
from benchmarks._scale_figures import ClientFigures, TickSample
from benchmarks._scale_workload import ScaleWorkload, scale_settings

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
    stop = asyncio.Event()
    ticker = asyncio.create_task(_tick_loop(scheduler, stop, result.ticks))
    try:
        if spec.role == LEADER:
            await _until_leading(scheduler)
            pipe.send(("ready", node))
            await asyncio.to_thread(pipe.recv)
        else:
            result.clients = await _run_clients(spec, scheduler, pipe, node)
    finally:
        stop.set()
        await ticker
    await scheduler.disconnect()
    return result


async def _run_clients(
    spec: ServerSpec,
    scheduler: PostgresScheduler,
    pipe: Connection,
    node: str,
) -> ClientFigures:
    pacer = RealPacer(spec.settle_seconds)
    driver = Driver(scheduler, ScaleWorkload(spec.waiting), pacer)
    await driver.start_holders()
    async with pacer.quiet(driver):  # the holders keep fetching during the fill
        pipe.send(("ready", node))
        _, plan = await asyncio.to_thread(pipe.recv)
    assert isinstance(plan, Plan)
    return await driver.measure(plan)


async def _tick_loop(
    scheduler: PostgresScheduler, stop: asyncio.Event, ticks: list[TickSample]
) -> None:
    """The tick every server process runs (as the middleware's lifespan does), timed."""
    while not stop.is_set():
        leading = scheduler.is_leader
        began, started = time.monotonic(), time.perf_counter()
        report = await scheduler.tick()
        elapsed = time.perf_counter() - started
        # A tick that fails (database trouble) steps down: it was still the leader's.
        led = leading or scheduler.is_leader
        ticks.append(TickSample(began, elapsed, led, leading and not scheduler.is_leader))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), report.next_tick_in)


async def _until_leading(scheduler: PostgresScheduler) -> None:
    deadline = time.monotonic() + LEAD_TIMEOUT_S
    while not scheduler.is_leader:
        if time.monotonic() > deadline:
            raise RuntimeError("the leader process did not take the leader lease")
        await asyncio.sleep(0.05)


def receive(pipe: Connection, process: Any, timeout: float) -> Any:
    """The next message of a server process; fails at once when the process died."""
    deadline = time.monotonic() + timeout
    while not pipe.poll(0.2):
        if not process.is_alive() and not pipe.poll(0):
            raise RuntimeError(f"server process {process.pid} exited ({process.exitcode})")
        if time.monotonic() > deadline:
            raise RuntimeError(f"server process {process.pid} did not answer in {timeout:.0f} s")
    return pipe.recv()


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
