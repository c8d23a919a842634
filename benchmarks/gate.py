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

Then the mixed crowd (:mod:`benchmarks._gate_mixed`, issue #28): the same arrivals, over
a third of them real ``curl`` processes without a download id, through ``memory`` and
``postgres`` (without the fault), each once with the link's rate told to the scheduler
and once without; the targets of issue #28 per kind of client. ``--crowd sdk`` or
``--crowd mixed`` runs one of the two.

``--quick`` runs them at a small scale (about two minutes per crowd) and writes no
results; the full run takes about 13 minutes for the SDK crowd and 14 for the mixed one on
this 2-CPU machine. Each crowd rewrites its own section of RESULTS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.simulation.engine import ClientSpec, oracle_completions

from arkvory_sched import PrincipalKind
from arkvory_sched.demo import create_example
from benchmarks._gate_fleet import Fleet
from benchmarks._gate_mixed import MIX, mixed_section, mixed_targets, run_mixed
from benchmarks._gate_report import Figures, figures, report_section, targets
from benchmarks._gate_run import MIB, Workload, run_fleet, sdk_crowd, server_env
from benchmarks._gate_sizing import run_sizing_gate, sizing_section
from benchmarks._machine import cpu_count, cpu_model, load_average
from benchmarks._report import write_section

# 900 downloads of 8 MiB in 1 MiB ranges: a mass update compressed into three minutes.
# R-SESS-12's five-second horizon and R-EST-3's one-second polls are absolute times, so a
# session lasts 1.8 s here (9 × 8 MiB at 40 MiB/s) to keep the order among the first
# marked waiters as small a part of the wait as sessions of minutes make it (ADR 0028).
FULL = Workload(900, 8 * MIB, 40 * MIB, 9, 10.0, 4, MIB, fault_at=70.0)
QUICK = Workload(120, 8 * MIB, 40 * MIB, 9, 4.0, 2, MIB, fault_at=12.0)
CONFIGS = ("memory", "postgres", "haproxy")
CROWDS = ("all", "sdk", "mixed", "sizing")
Section = tuple[str, list[tuple[str, bool, str]]]
_PORTS = {"memory": 18600, "postgres": 18620, "haproxy": 18640}


async def run_config(name: str, workload: Workload, files: Path, root: Path) -> Figures:
    """Start one configuration, run the SDK crowd through it, stop it, and measure."""

    async def crowd(fleet: Fleet, url: str, origin: float) -> list[dict[str, Any]]:
        return await sdk_crowd(workload, fleet, url, origin, workload.arrivals())

    env = server_env(workload, common_practice=name == "haproxy")
    run = await run_fleet(name, root / name, _PORTS[name], workload, files, env, crowd)
    specs = [
        ClientSpec("", "", PrincipalKind.SERVICE, workload.size, r["arrival"] - run.origin)
        for r in run.records
    ]
    ideal = oracle_completions(specs, workload.slots, workload.rate)
    return figures(
        workload, run.records, ideal, run.origin, run.link, run.sampler, run.cpu, run.fault
    )


async def _sdk(args: argparse.Namespace, workload: Workload, files: Path, root: Path) -> Section:
    """The SDK crowd through each configuration, its targets (issue #20) and section."""
    machine = f"{cpu_count()} CPUs ({cpu_model()}), load before the run {load_average()}"
    started, results = datetime.now(UTC), {}
    for name in args.configs.split(","):
        print(f"== {name}: {workload.downloads} downloads", flush=True)
        results[name] = await run_config(name, workload, files, root)
    verdicts = targets(workload, results)
    return report_section(workload, results, verdicts, _command(), machine, started), verdicts


def _machine() -> str:
    return f"{cpu_count()} CPUs ({cpu_model()}), load before the run {load_average()}"


def _each_store(args: argparse.Namespace, flags: tuple[bool, bool]) -> list[tuple[str, bool]]:
    """Each store asked for (memory, postgres) with each of two ``flags``, in order."""
    stores = [name for name in args.configs.split(",") if name in ("memory", "postgres")]
    return [(name, flag) for name in stores for flag in flags]


async def _mixed(args: argparse.Namespace, workload: Workload, files: Path, root: Path) -> Section:
    """The mixed crowd on each store, with the link's rate told and not; its targets
    (issue #28) and section."""
    machine, started, results = _machine(), datetime.now(UTC), {}
    for number, (name, told) in enumerate(_each_store(args, (True, False))):
        print(f"== mixed, {name}, rate {'told' if told else 'not told'}", flush=True)
        port = 18660 + 20 * number
        results[name, told] = await run_mixed(name, told, workload, files, root, port)
    verdicts = mixed_targets(results)
    return mixed_section(workload, MIX, results, verdicts, _command(), machine, started), verdicts


async def _sizing(args: argparse.Namespace, workload: Workload, files: Path, root: Path) -> Section:
    """The sizing crowd on each store, slots fixed and sized (issue #30); its section.
    It reports figures, not verdicts: the targets are the simulation's (scenario 6)."""
    machine, started, results = _machine(), datetime.now(UTC), {}
    for number, (name, auto) in enumerate(_each_store(args, (False, True))):
        print(f"== sizing, {name}, slots {'sized' if auto else 'fixed'}", flush=True)
        port = 18760 + 20 * number
        results[name, auto] = await run_sizing_gate(name, auto, workload, files, root, port)
    return sizing_section(workload, results, _command(), machine, started), []


def _command() -> str:
    return shlex.join(["python", "-m", "benchmarks.gate", *sys.argv[1:]])


async def _main(args: argparse.Namespace) -> int:
    workload = QUICK if args.quick else FULL
    verdicts: list[tuple[str, bool, str]] = []
    with tempfile.TemporaryDirectory(prefix="arkvory-gate-") as temporary:
        root = Path(temporary)
        create_example(root / "files", large_files=1, size=workload.size)
        crowds = {"sdk": [_sdk], "mixed": [_mixed], "sizing": [_sizing]}
        runs = crowds.get(args.crowd) or [_sdk, _mixed, _sizing]
        for run in runs:
            section, found = await run(args, workload, root / "files", root)
            verdicts += found
            print(section, flush=True)
            if not args.quick:  # RESULTS.md keeps the full runs, each in its own section
                write_section(section)
    return 0 if all(ok for _, ok, _ in verdicts) else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="120 downloads, 2 minutes a crowd")
    parser.add_argument("--configs", default=",".join(CONFIGS), help="memory,postgres,haproxy")
    parser.add_argument(
        "--crowd",
        choices=CROWDS,
        default="all",
        help="sdk: the SDK crowd; mixed: SDK and curl clients, memory and postgres; sizing: "
        "a third of the SDK processes paced, slots fixed and sized (default: all three)",
    )
    return asyncio.run(_main(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
