"""The gate: the mass update end to end, with real processes, beside the common practice.

``make bench-gate`` (``python -m benchmarks.gate``). A crowd of downloads driven by the
real async SDK (several client processes, many downloads each, arrivals spread over the
first seconds) goes through one link (:mod:`benchmarks._gate_link`: one token bucket every
server sends through, since Debian 12's HAProxy has no bandwidth filter) to:

1. ``memory``: one demo server on the in-memory scheduler;
2. ``postgres``: three demo servers sharing a PostgreSQL queue (a throwaway schema,
   ``arkvory-sched migrate``), behind HAProxy round-robin per request without affinity;
   the queue's leader is SIGKILLed mid-run;
3. ``haproxy``: the common practice: the same three servers with the scheduler admitting
   everything (``shared``, 1,024 places), so HAProxy's per-request queue (``maxconn``
   per server, ``timeout queue 20s``) is the only admission; the SDK's default retry
   budget (5 per request, 20 per download) meets HAProxy's ``503``, which has no
   ``Retry-After``, so every one of them counts.

Each configuration is measured against the ideal oracle of the simulation
(``tests.simulation.engine.oracle_completions``) for the arrivals the crowd really had,
and the targets of issue #20 are asserted (PASS/FAIL, exit status 1 on a FAIL).
``--quick`` runs all three at a small scale (about two minutes) and writes no results; the
full run takes about 13 minutes on this 2-CPU machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
from tests.simulation.engine import ClientSpec, oracle_completions

from arkvory_sched import PrincipalKind
from arkvory_sched.demo import create_example
from benchmarks._gate_fleet import DSN, TOKEN, Fleet, Sampler
from benchmarks._gate_report import Figures, figures, report_section, targets
from benchmarks._machine import cpu_count, cpu_model, load_average

MIB = 1024 * 1024


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


# 900 downloads of 8 MiB in 1 MiB ranges: a mass update compressed into three minutes.
# R-SESS-12's five-second horizon and R-EST-3's one-second polls are absolute times, so a
# session lasts 1.8 s here (9 × 8 MiB at 40 MiB/s) to keep the order among the first
# marked waiters as small a part of the wait as sessions of minutes make it (ADR 0028).
FULL = Workload(900, 8 * MIB, 40 * MIB, 9, 10.0, 4, MIB, fault_at=70.0)
QUICK = Workload(120, 8 * MIB, 40 * MIB, 9, 4.0, 2, MIB, fault_at=12.0)
CONFIGS = ("memory", "postgres", "haproxy")


def _server_env(workload: Workload, common_practice: bool) -> dict[str, str]:
    env = {
        "ARKVORY_MAX_DOWNLOAD_SESSIONS": str(workload.slots),
        "ARKVORY_DOWNLOAD_RESERVE": "0",  # one service-account crowd, no people
        "ARKVORY_MAX_DOWNLOADS_PER_PRINCIPAL": str(workload.slots),
        "ARKVORY_DOWNLOAD_SESSION_MIN_BYTES": str(MIB),  # the crowd's objects are sessions
    }
    if common_practice:
        env |= {"ARKVORY_DOWNLOAD_STRATEGY": "shared", "ARKVORY_MAX_DOWNLOADS": "1024"}
    return env


async def _crowd(workload: Workload, fleet: Fleet, url: str, origin: float) -> list[Any]:
    """Run the client processes, each with every ``processes``-th arrival; their records."""
    arrivals, n, outs = workload.arrivals(), workload.processes, []
    for i in range(n):
        spec = {"url": url, "token": TOKEN, "origin": origin, "arrivals": arrivals[i::n]}
        spec["range_size"] = workload.range_size
        spec["directory"] = f"/dev/shm/arkvory-gate-{i}-{origin:.0f}"
        outs.append(fleet.work / f"records-{i}.json")
        fleet.clients.append(
            fleet.spawn(
                ["-m", "benchmarks._gate_crowd", json.dumps(spec), str(outs[-1])], f"crowd-{i}"
            )
        )
    while any(process.poll() is None for process in fleet.clients):
        await asyncio.sleep(0.5)
    return [record for out in outs for record in json.loads(out.read_text())]


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


async def run_config(name: str, workload: Workload, files: Path, root: Path) -> Figures:
    """Start one configuration, run the crowd through it, stop it, and measure."""
    (work := root / name).mkdir()
    fleet = Fleet(work, {"memory": 18600, "postgres": 18620, "haproxy": 18640}[name])
    schema = f"gate_{int(time.time())}" if name == "postgres" else None
    sampler, fault = Sampler([], schema), None
    try:
        if schema is not None:  # as an operator would: arkvory-sched migrate, then serve
            code = "import sys; from arkvory_sched.postgres._cli import main; sys.exit(main())"
            argv = ["-c", code, "migrate", "--dsn", DSN, "--schema", schema]
            if fleet.spawn(argv, "migrate").wait():
                raise RuntimeError(f"arkvory-sched migrate failed; see {work}")
        env = _server_env(workload, common_practice=name == "haproxy")
        link_out = fleet.start_link(workload.rate)
        fleet.start_servers(1 if name == "memory" else 3, files, workload.rate, env, schema)
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
        if schema is not None:
            killing = asyncio.ensure_future(
                _kill_leader(fleet, sampler, origin + workload.fault_at)
            )
        url = f"http://127.0.0.1:{front}/files/large/image-1.bin"
        records = await _crowd(workload, fleet, url, origin)
        if killing is not None:
            fault = {**await killing, "origin": origin}
        stop.set()
        await sampling
    finally:
        cpu = fleet.stop()
        if schema is not None:
            connection = await asyncpg.connect(DSN)
            await connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
            await connection.close()
    link = json.loads(link_out.read_text())
    specs = [
        ClientSpec("", "", PrincipalKind.SERVICE, workload.size, r["arrival"] - origin)
        for r in records
    ]
    ideal = oracle_completions(specs, workload.slots, workload.rate)
    return figures(workload, records, ideal, origin, link, sampler, cpu, fault)


async def _main(args: argparse.Namespace) -> int:
    workload = QUICK if args.quick else FULL
    machine = f"{cpu_count()} CPUs ({cpu_model()}), load before the run {load_average()}"
    started = datetime.now(UTC)
    with tempfile.TemporaryDirectory(prefix="arkvory-gate-") as temporary:
        create_example(Path(temporary, "files"), large_files=1, size=workload.size)
        results = {}
        for name in args.configs.split(","):
            print(f"== {name}: {workload.downloads} downloads", flush=True)
            results[name] = await run_config(
                name, workload, Path(temporary, "files"), Path(temporary)
            )
    verdicts = targets(workload, results)
    command = "python -m benchmarks.gate" + (" --quick" if args.quick else "")
    section = report_section(workload, results, verdicts, command, machine, started)
    print(section)
    if not args.quick:  # RESULTS.md keeps the full run; the gate's section is the last one
        path = Path(__file__).with_name("RESULTS.md")
        head = path.read_text(encoding="utf-8").partition("\n" + section.splitlines()[0])[0]
        path.write_text(head.rstrip("\n") + "\n\n" + section, encoding="utf-8")
    return 0 if all(ok for _, ok, _ in verdicts) else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="120 downloads, about 2 minutes")
    parser.add_argument("--configs", default=",".join(CONFIGS), help="memory,postgres,haproxy")
    return asyncio.run(_main(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
