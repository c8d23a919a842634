"""The gate's figures, its targets and its section of RESULTS.md.

Every figure comes from one place: completion, start, announced start and positions from
the SDK's events in the client processes; the link's bytes from the link; the active
sessions from ``/readyz`` (in memory) or the shared queue's slot rows (PostgreSQL); CPU
from ``/proc``. The ideal is the simulation's oracle and the estimate bound the
simulation's :func:`estimate_quality`, on the arrivals the crowd really had.
"""

from __future__ import annotations

import bisect
import itertools
import math
import statistics
from datetime import datetime
from math import nan
from typing import TYPE_CHECKING, Any

from tests.simulation.engine import ClientResult, ClientSpec
from tests.simulation.scenarios import estimate_quality

from arkvory_sched import PrincipalKind

if TYPE_CHECKING:
    from benchmarks._gate_fleet import Sampler
    from benchmarks._gate_run import Workload

GIB = 1024**3
LABELS = {
    "memory": "1. one server, in-memory scheduler",
    "postgres": "2. three servers sharing PostgreSQL behind HAProxy, leader killed mid-run",
    "haproxy": "3. the common practice: HAProxy's per-request queue, no scheduler",
}


METHOD = (
    "Configuration 3 runs the same servers with `ARKVORY_DOWNLOAD_STRATEGY=shared` and 1,024"
    " per-request places, so the scheduler admits every request and HAProxy's queue (`maxconn`"
    " {maxconn} per server, `timeout queue 20s`) is the only admission; the SDK's default budget"
    " (5 failed attempts per request, 20 per download) counts every HAProxy `503`, which has no"
    " `Retry-After`. Ideal: the simulation's oracle on the arrivals the crowd really had."
    " Estimates are scored as the simulation scores them, from the first answer with a place."
    " Double grants: the slot rows every 250 ms (ADR 0010), broken by more held slots than the"
    " limit, a session on two slots, or a fencing token seen with another slot or session."
    " Positions: every place each client was told, in order (ADR 0020: with nobody joining"
    " ahead a place never rises)."
)
Figures = dict[str, Any]
"""One configuration's figures by name (see :func:`figures`); ``nan`` where none apply."""


def pct(values: list[float], share: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(share * len(ordered)) - 1))]


def mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else math.nan


def waiting_spans(records: list[dict[str, Any]]) -> list[list[float]]:
    """The times anyone waited (arrived, no byte yet), as sorted disjoint ``[from, to]``."""
    spans = sorted((r["arrival"], r["start"] or r["stop"]) for r in records)
    merged: list[list[float]] = []
    for low, high in spans:
        if merged and low <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], high)
        else:
            merged.append([low, high])
    return merged


def waiting_at(spans: list[list[float]], moment: float) -> bool:
    index = bisect.bisect_right([low for low, _ in spans], moment) - 1
    return index >= 0 and moment < spans[index][1]


def utilisation(records: list[dict[str, Any]], link: list[list[float]], rate: int) -> float:
    """Bytes the link carried while anyone waited (arrived, no byte yet) over what it could."""
    merged = waiting_spans(records)
    carried = seconds = 0.0
    for (t0, b0), (t1, b1) in itertools.pairwise(link):
        if waiting_at(merged, (t0 + t1) / 2):
            carried, seconds = carried + b1 - b0, seconds + t1 - t0
    return carried / (rate * seconds) if seconds else math.nan


def _double_grants(sampler: Sampler, slots: int) -> int:
    """Samples breaking a grant's uniqueness: more held slots than the limit, a session on
    two slots, or one fencing token (one grant) seen with another slot or session."""
    owners: dict[int, tuple[int, bytes]] = {}
    broken = 0
    for _, held in sampler.slots:
        keys = [key for _, key, _, _ in held]
        broken += len(held) > slots or len(set(keys)) != len(keys)
        for slot, key, token, _ in held:
            broken += owners.setdefault(token, (slot, key)) != (slot, key)
    return broken


def _restore(sampler: Sampler, fault: dict[str, Any]) -> float | None:
    """Seconds until every slot the killed server held serves another server's session."""
    waits = []
    for slot in fault["held"]:
        after = (
            t
            for t, held in sampler.slots
            if t > fault["at"]
            for s, _, _, holder in held
            if s == slot and fault["node"] not in holder
        )
        first = next(after, None)
        waits.append(math.inf if first is None else first - fault["at"])
    return max(waits) if waits else None


def told_quality(
    records: list[dict[str, Any]], size: int, origin: float
) -> tuple[list[dict[str, Any]], float, float]:
    """The downloads told a start that then started, and how true that start was: the
    p95 of error ÷ bound and the share inside the interval, scored as the simulation
    scores them (``estimate_quality``): the interval of each one's first answer with a
    place, the error of its first start told on a configured or measured rate (an
    answer on a guessed rate says so, ADR 0042)."""
    answered = [r for r in records if r["earliest"] is not None and r["start"] is not None]
    results = [
        ClientResult(
            ClientSpec("", "", PrincipalKind.SERVICE, size, r["arrival"] - origin),
            first_start=r["start"] - origin,
            estimate=None if r["estimate"] is None else r["estimate"] - origin,
            estimate_earliest=r["earliest"] - origin,
            estimate_latest=r["latest"] - origin,
        )
        for r in answered
    ]
    bound_p95, _, inside = estimate_quality(results)
    return [r for r in answered if r["estimate"] is not None], bound_p95, inside


def figures(
    workload: Workload,
    records: list[dict[str, Any]],
    ideal: list[float],
    origin: float,
    link: list[list[float]],
    sampler: Sampler,
    cpu: float,
    fault: dict[str, Any] | None,
) -> Figures:
    done = [r for r in records if r["outcome"] == "finished"]
    completions = [r["end"] - r["arrival"] for r in done]
    told, bound_p95, inside = told_quality(records, workload.size, origin)
    errors = [abs(r["start"] - r["estimate"]) for r in told]
    relative = [e / max(r["start"] - r["arrival"], 1e-9) for e, r in zip(errors, told, strict=True)]
    rises = [b[1] - a[1] for r in records for a, b in itertools.pairwise(r["positions"])]
    gib = (link[-1][1] - link[0][1]) / GIB if link else 0.0
    if fault is not None:
        fault = {**fault, "restore": _restore(sampler, fault)}
    finishes = sorted(r["end"] - origin for r in done)
    return {
        "downloads": len(records),
        "finished": len(done),
        "failed": sum(r["outcome"] == "failed" for r in records),
        "gave_up": sum(r["outcome"] == "gave_up" for r in records),
        "failures": sum(r["failures"] for r in records),
        "completion": (mean(completions), pct(completions, 0.5), pct(completions, 0.95)),
        "ideal": (mean(ideal), pct(ideal, 0.5), pct(ideal, 0.95)),
        "first_batch": finishes[workload.slots - 1] if len(finishes) >= workload.slots else nan,
        "utilisation": utilisation(records, link, workload.rate),
        "estimated": len(told),
        "error": (pct(errors, 0.5), pct(errors, 0.95)),
        "relative": (pct(relative, 0.5), pct(relative, 0.95)),
        "bound_p95": bound_p95 if told else nan,
        "inside": inside if told else nan,
        "max_active": max((n for _, n in sampler.active), default=nan),
        "gib": gib,
        "cpu_per_gib": cpu / gib if gib else nan,
        "position_rise": max(rises, default=0),
        "double_grants": _double_grants(sampler, workload.slots) if sampler.slots else None,
        "fault": fault,
    }


def targets(workload: Workload, results: dict[str, Figures]) -> list[tuple[str, bool, str]]:
    """Each target of issue #20: its name, its verdict and the figure it was judged on."""
    out: list[tuple[str, bool, str]] = []
    batch, slots = workload.batch_seconds, workload.slots
    for name, ceiling in (("memory", 1.10), ("postgres", 1.15)):
        if (f := results.get(name)) is None:
            continue
        ratio, lost = f["completion"][0] / f["ideal"][0], f["downloads"] - f["finished"]
        out += [
            (f"{name}: no download fails or gives up", lost == 0, f"{lost} did"),
            (f"{name}: active never above {slots}", f["max_active"] <= slots, f"{f['max_active']}"),
            (f"{name}: mean ≤ {ceiling:.2f} × ideal", ratio <= ceiling, f"{ratio:.3f} ×"),
            (
                f"{name}: first batch ≤ 1.2 × {batch:.1f} s",
                f["first_batch"] <= 1.2 * batch,
                in_seconds(f["first_batch"]),
            ),
            (
                f"{name}: estimate error p95 ≤ max(10 % of wait, 2 s)",
                f["bound_p95"] <= 1.0,
                f"p95 of error ÷ bound {f['bound_p95']:.2f}",
            ),
            (
                f"{name}: ≥ 90 % of starts inside the interval",
                f["inside"] >= 0.9,
                f"{100 * f['inside']:.1f} %",
            ),
        ]
    if (f := results.get("postgres")) is not None:
        rise, grants = f["position_rise"], f["double_grants"]
        out.append(("postgres: no double grant", grants == 0, f"{grants} samples break one"))
        out.append((f"postgres: no place moves back by > {slots}", rise <= slots, f"{rise}"))
        if (common := results.get("haproxy")) is not None:
            ratio = f["completion"][0] / common["completion"][0]
            out.append(("postgres: mean ≤ 0.6 × haproxy's", ratio <= 0.6, f"{ratio:.3f} ×"))
    if (f := results.get("haproxy")) is not None:
        lost = f"{f['failed']} failed, {f['gave_up']} gave up"
        counted = f["finished"] + f["failed"] + f["gave_up"] == f["downloads"]
        out.append(("haproxy: failures and give-ups counted, not hidden", counted, lost))
    return out


def in_seconds(value: float) -> str:
    return "–" if math.isnan(value) else f"{value:.1f} s"


def _rows(f: Figures, slots: int, batch: float) -> list[tuple[str, str]]:
    told, (e50, e95), (r50, r95) = f["estimated"] > 0, f["error"], f["relative"]
    errors = f"{in_seconds(e50)} / {in_seconds(e95)} ({100 * r50:.0f} % / {100 * r95:.0f} %)"
    rows = [
        (
            "finished / failed / gave up (failed requests retried)",
            f"{f['finished']} / {f['failed']} / {f['gave_up']} ({f['failures']})",
        ),
        ("completion mean / p50 / p95", " / ".join(map(in_seconds, f["completion"]))),
        ("the ideal oracle's, same arrivals", " / ".join(map(in_seconds, f["ideal"]))),
        ("mean ÷ ideal mean", f"{f['completion'][0] / f['ideal'][0]:.3f}"),
        (
            f"first batch: the {slots}th completion (one batch {batch:.1f} s)",
            in_seconds(f["first_batch"]),
        ),
        ("link utilisation while anyone waits", f"{100 * f['utilisation']:.1f} %"),
        (
            "start-estimate error p50 / p95 (÷ the wait)",
            f"{errors} over {f['estimated']} told a start" if told else "– (nobody is told one)",
        ),
        ("p95 of error ÷ max(10 % of the wait, 2 s)", f"{f['bound_p95']:.2f}" if told else "–"),
        ("starts inside the announced interval", f"{100 * f['inside']:.1f} %" if told else "–"),
        (
            "most sessions active (sampled every 250 ms)",
            "–" if math.isnan(f["max_active"]) else f"{f['max_active']} (limit {slots})",
        ),
        ("server CPU per GiB delivered", f"{f['cpu_per_gib']:.2f} s ({f['gib']:.2f} GiB)"),
    ]
    if f["double_grants"] is not None:
        rows.append(("samples of the slot rows breaking a grant", str(f["double_grants"])))
        rows.append(("largest move back of a position", str(f["position_rise"])))
    return rows


def report_section(
    workload: Workload,
    results: dict[str, Figures],
    verdicts: list[tuple[str, bool, str]],
    command: str,
    machine: str,
    started: datetime,
) -> str:
    """The section of RESULTS.md: the run, one table per configuration, the targets."""
    w = workload
    lines = [
        "## The gate: the mass update end to end",
        "",
        f"`{command}` (`make bench-gate`), {started:%Y-%m-%d %H:%M} UTC; {machine}."
        f" {w.downloads} downloads of one {w.size >> 20} MiB object by the async SDK"
        f" ({w.processes} client processes, arrivals uniform over the first {w.spread:.0f}"
        f" s, {w.range_size >> 20} MiB ranges), one {w.rate >> 20} MiB/s link shared by the"
        f" fleet (one token bucket every server sends through), {w.slots} session slots.",
        "",
        METHOD.format(maxconn=w.slots // 3),
        "",
    ]
    for name, f in results.items():
        lines += [f"### {LABELS[name]}", "", "| figure | measured |", "| --- | --- |"]
        lines += [f"| {a} | {b} |" for a, b in _rows(f, w.slots, w.batch_seconds)] + [""]
        if (fault := f["fault"]) is not None:
            who = "the server leading the queue" if fault["was_leader"] else "a server"
            lines += [
                f"The fault: SIGKILL of {who} at {fault['at'] - fault['origin']:.0f} s;"
                f" it held slots {fault['held'] or 'none'}, which served sessions through"
                f" the other servers again after {in_seconds(fault['restore'] or nan)}.",
                "",
            ]
    lines += ["### Targets", "", "| target | measured | result |", "| --- | --- | --- |"]
    lines += [f"| {n} | {m} | {'PASS' if ok else '**FAIL**'} |" for n, ok, m in verdicts]
    return "\n".join(lines) + "\n"
