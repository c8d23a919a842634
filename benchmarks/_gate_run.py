"""One run of the gate: a configuration's processes started, a crowd run through them, stopped.

Shared by the SDK crowd (:mod:`benchmarks.gate`) and the mixed crowd of SDK and curl
clients (:mod:`benchmarks._gate_mixed`), so both meet the same servers, link, HAProxy
and sampling, and differ only in who downloads.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg

from benchmarks._gate_fleet import DSN, TOKEN, Fleet, Sampler

__all__ = ["MIB", "Crowd", "Run", "Workload", "run_fleet", "sdk_crowd", "server_env"]

MIB = 1024 * 1024

Crowd = Callable[[Fleet, str, float], Awaitable[list[dict[str, Any]]]]
"""Runs the clients against ``url`` from the wall-clock ``origin``; returns their records."""


@dataclass(frozen=True, slots=True)
class Workload:
    """The crowd: ``downloads`` of one ``size`` object over a ``rate`` link, ``slots``
    sessions at once, arrivals uniform over ``spread`` seconds from ``processes``."""

    downloads: int
    size: int
    rate: int
    slots: int
    spread: float
    processes: int
    range_size: int  # the SDK's chunk_size: what one request asks for
    fault_at: float  # seconds after the origin at which config 2 loses its leader

    @property
    def batch_seconds(self) -> float:
        return self.slots * self.size / self.rate

    def arrivals(self) -> list[float]:
        rng = random.Random(20)
        return sorted(rng.uniform(0.0, self.spread) for _ in range(self.downloads))


@dataclass(frozen=True, slots=True)
class Run:
    """What one configuration's run left to measure."""

    records: list[dict[str, Any]]
    origin: float
    link: list[list[float]]
    sampler: Sampler
    cpu: float
    fault: dict[str, Any] | None


def server_env(workload: Workload, common_practice: bool) -> dict[str, str]:
    env = {
        "ARKVORY_MAX_DOWNLOAD_SESSIONS": str(workload.slots),
        "ARKVORY_DOWNLOAD_RESERVE": "0",  # one service-account crowd, no people
        "ARKVORY_MAX_DOWNLOADS_PER_PRINCIPAL": str(workload.slots),
        "ARKVORY_DOWNLOAD_SESSION_MIN_BYTES": str(MIB),  # the crowd's objects are sessions
    }
    if common_practice:
        env |= {"ARKVORY_DOWNLOAD_STRATEGY": "shared", "ARKVORY_MAX_DOWNLOADS": "1024"}
    return env


async def sdk_crowd(
    workload: Workload,
    fleet: Fleet,
    url: str,
    origin: float,
    arrivals: list[float],
    limit_rates: dict[int, float] | None = None,
) -> list[dict[str, Any]]:
    """Run the SDK client processes, each with every ``processes``-th arrival; their
    records, each with its process's ``limit_rate`` (``None``: not paced). Process ``i``
    reads each response at ``limit_rates[i]`` bytes per second if given (issue #30)."""
    n, outs, paced = workload.processes, [], limit_rates or {}
    for i in range(n):
        spec = {"url": url, "token": TOKEN, "origin": origin, "arrivals": arrivals[i::n]}
        spec["range_size"] = workload.range_size
        spec["limit_rate"] = paced.get(i)
        spec["directory"] = f"/dev/shm/arkvory-gate-{i}-{origin:.0f}"
        outs.append(fleet.work / f"records-{i}.json")
        fleet.clients.append(
            fleet.spawn(
                ["-m", "benchmarks._gate_crowd", json.dumps(spec), str(outs[-1])], f"crowd-{i}"
            )
        )
    while any(process.poll() is None for process in fleet.clients):
        await asyncio.sleep(0.5)
    return [
        {**record, "limit_rate": paced.get(i)}
        for i, out in enumerate(outs)
        for record in json.loads(out.read_text())
    ]


async def _kill_leader(fleet: Fleet, sampler: Sampler, at: float) -> dict[str, Any]:
    """SIGKILL the server leading the shared queue at ``at`` (epoch seconds)."""
    await asyncio.sleep(max(0.0, at - time.time()))
    pids = [server.pid for server in fleet.servers]
    parts = (sampler.leader or "").split(":")  # node ids are host:pid:random
    leader = int(parts[-2]) if len(parts) >= 3 and parts[-2].isdigit() else None
    index = pids.index(leader) if leader in pids else 1
    held = sampler.slots[-1][1] if sampler.slots else []
    killed_at, node = time.time(), f":{pids[index]}:"
    fleet.kill(index)
    return {
        "at": killed_at,
        "node": node,
        "was_leader": leader == pids[index],
        "held": [slot for slot, _, _, holder in held if node in holder],
    }


async def run_fleet(
    name: str,
    work: Path,
    port_base: int,
    workload: Workload,
    files: Path,
    env: dict[str, str],
    crowd: Crowd,
    *,
    told: bool = True,
    fault: bool = True,
) -> Run:
    """Start configuration ``name`` (``memory``: one server; ``postgres``: three sharing a
    throwaway schema behind HAProxy; ``haproxy``: three behind HAProxy's ``maxconn``
    queue), run ``crowd`` through it, stop it. ``told``: the servers know the link's
    rate (``--bandwidth``); otherwise the link paces them all the same and the scheduler
    measures. ``fault``: on PostgreSQL, SIGKILL the leader at ``workload.fault_at``."""
    work.mkdir()
    fleet = Fleet(work, port_base)
    schema = f"gate_{int(time.time())}_{port_base}" if name == "postgres" else None
    sampler, lost = Sampler([], schema), None
    try:
        if schema is not None:  # as an operator would: arkvory-sched migrate, then serve
            code = "import sys; from arkvory_sched.postgres._cli import main; sys.exit(main())"
            argv = ["-c", code, "migrate", "--dsn", DSN, "--schema", schema]
            if fleet.spawn(argv, "migrate").wait():
                raise RuntimeError(f"arkvory-sched migrate failed; see {work}")
        link_out = fleet.start_link(workload.rate)
        count = 1 if name == "memory" else 3
        fleet.start_servers(count, files, workload.rate, env, schema, told=told)
        for port in fleet.server_ports:
            await fleet.wait_ready(f"http://127.0.0.1:{port}/readyz")
        maxconn = workload.slots // 3 if name == "haproxy" else None
        front = fleet.server_ports[0] if name == "memory" else fleet.start_haproxy(maxconn)
        await fleet.wait_ready(f"http://127.0.0.1:{front}/readyz")
        if name != "haproxy":  # the common practice has no sessions to count
            sampler.readyz = [f"http://127.0.0.1:{p}/readyz" for p in fleet.server_ports]
        stop = asyncio.Event()
        sampling = asyncio.ensure_future(sampler.run(stop))
        origin = time.time() + 2.0
        killing = None
        if schema is not None and fault:
            killing = asyncio.ensure_future(
                _kill_leader(fleet, sampler, origin + workload.fault_at)
            )
        url = f"http://127.0.0.1:{front}/files/large/image-1.bin"
        records = await crowd(fleet, url, origin)
        if killing is not None:
            lost = {**await killing, "origin": origin}
        stop.set()
        await sampling
    finally:
        cpu = fleet.stop()
        if schema is not None:
            connection = await asyncpg.connect(DSN)
            await connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
            await connection.close()
    link = json.loads(link_out.read_text())
    return Run(records, origin, link, sampler, cpu, lost)
