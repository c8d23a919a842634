"""The gate's sizing crowd: a third of the SDK processes read at a twentieth of the link
(issue #30, ADR 0038).

The SDK crowd of the gate (900 downloads of 8 MiB, one 40 MiB/s link) with the SDK
processes split in three: the first third reads every response at ``LIMIT_SHARE`` of
the link, as sites behind a thin line do. Each store runs it twice: with nine fixed
slots (the gate's count) and with slots that size themselves from two to 64
(``ARKVORY_MIN_DOWNLOAD_SESSIONS``). The link's rate is told. PostgreSQL is the gate's
three servers behind HAProxy, without the fault.

The figures: the link's use while anyone waits, the mean completion of each kind of
client against the oracle that knows each client's speed
(``tests.simulation.oracle.oracle_with_speeds``), the most sessions active at once.
"""

from __future__ import annotations

import math
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.simulation.engine import ClientSpec
from tests.simulation.oracle import oracle_with_speeds

from arkvory_sched import PrincipalKind
from benchmarks._gate_fleet import Fleet
from benchmarks._gate_report import mean, utilisation
from benchmarks._gate_run import Workload, run_fleet, sdk_crowd, server_env

__all__ = ["AUTO_BOUNDS", "LIMIT_SHARE", "run_sizing_gate", "sizing_section"]

LIMIT_SHARE = 1 / 20
AUTO_BOUNDS = (2, 64)
PROCESSES = 6  # two of them paced


async def run_sizing_gate(
    name: str, auto: bool, workload: Workload, files: Path, root: Path, port_base: int
) -> dict[str, Any]:
    """The crowd through store ``name``, slots fixed at ``workload.slots`` or sized;
    its figures."""
    crowd_workload = Workload(
        workload.downloads,
        workload.size,
        workload.rate,
        workload.slots,
        workload.spread,
        PROCESSES,
        workload.range_size,
        workload.fault_at,
    )
    paced = {i: workload.rate * LIMIT_SHARE for i in range(PROCESSES // 3)}

    async def crowd(fleet: Fleet, url: str, origin: float) -> list[dict[str, Any]]:
        arrivals = crowd_workload.arrivals()
        return await sdk_crowd(crowd_workload, fleet, url, origin, arrivals, paced)

    env = server_env(crowd_workload, common_practice=False)
    if auto:
        low, high = AUTO_BOUNDS
        env |= {
            "ARKVORY_MAX_DOWNLOAD_SESSIONS": str(high),
            "ARKVORY_MIN_DOWNLOAD_SESSIONS": str(low),
            "ARKVORY_MAX_DOWNLOADS_PER_PRINCIPAL": str(high),
            "ARKVORY_MAX_DOWNLOADS": str(high),
        }
    work = root / f"sizing-{name}-{'auto' if auto else 'fixed'}"
    run = await run_fleet(
        name, work, port_base, crowd_workload, files, env, crowd, told=True, fault=False
    )
    records = run.records
    specs = [
        ClientSpec(
            "",
            "",
            PrincipalKind.SERVICE,
            workload.size,
            r["arrival"] - run.origin,
            rate_cap=r["limit_rate"],
        )
        for r in records
    ]
    ideal = oracle_with_speeds(specs, workload.rate)
    done = [r for r in records if r["outcome"] == "finished"]

    def kind(paced_kind: bool) -> dict[str, float]:
        group = [i for i, r in enumerate(records) if (r["limit_rate"] is not None) == paced_kind]
        completions = [
            records[i]["end"] - records[i]["arrival"] for i in group if records[i]["end"]
        ]
        return {"mean": mean(completions), "ideal": mean([ideal[i] for i in group])}

    return {
        "downloads": len(records),
        "finished": len(done),
        "use": utilisation(records, run.link, workload.rate),
        "most": max((n for _, n in run.sampler.active), default=math.nan),
        "all": {"mean": mean([r["end"] - r["arrival"] for r in done]), "ideal": mean(ideal)},
        "paced": kind(True),
        "fast": kind(False),
    }


def sizing_section(
    workload: Workload,
    results: dict[tuple[str, bool], dict[str, Any]],
    command: str,
    machine: str,
    started: datetime,
) -> str:
    """The section of ``benchmarks/RESULTS.md`` for the sizing crowd."""
    low, high = AUTO_BOUNDS
    lines = [
        "## The gate: slots that size themselves (issue #30)",
        "",
        f"`{command}`, {started:%Y-%m-%d %H:%M} UTC; {machine}. {workload.downloads}"
        f" downloads of one {workload.size // 2**20} MiB object by the async SDK in"
        f" {PROCESSES} processes, arrivals uniform over the first {workload.spread:.0f} s;"
        f" the first {PROCESSES // 3} processes read every response at"
        f" {workload.rate * LIMIT_SHARE / 2**20:.0f} MiB/s (a twentieth of the link). One"
        f" {workload.rate // 2**20} MiB/s link, its rate told. Slots fixed at"
        f" {workload.slots}, or sized between {low} and {high} (`ARKVORY_MIN_DOWNLOAD_SESSIONS`,"
        " ADR 0038). The oracle knows each client's speed: it starts the next download"
        " whenever the running ones leave the link room.",
        "",
        "| store, slots | finished | link use while anyone waits | mean ÷ oracle (all)"
        " | paced clients: mean / oracle | others: mean / oracle | most active |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for (name, auto), f in results.items():
        slots = f"{low}–{high}" if auto else str(workload.slots)
        paced, fast, every = f["paced"], f["fast"], f["all"]
        ratio = every["mean"] / every["ideal"]
        lines.append(
            f"| {name}, {slots} | {f['finished']} / {f['downloads']} | {100 * f['use']:.1f} %"
            f" | {ratio:.2f} | {paced['mean']:.1f} s / {paced['ideal']:.1f} s"
            f" | {fast['mean']:.1f} s / {fast['ideal']:.1f} s | {f['most']} |"
        )
    return "\n".join(lines) + "\n"
