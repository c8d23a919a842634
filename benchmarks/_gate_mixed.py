"""The gate's mixed crowd: SDK downloads beside real curl processes (issue #28).

The SDK crowd proves the estimates for clients that send a download id; most of a real
crowd does not (curl, wget, browsers, package managers). Here ``MIX`` of the same
arrivals are Debian's ``curl`` (:mod:`benchmarks._gate_curl`: whole-file GETs, resumes
from the middle, tail reads first, a few clients that take a tenth of their share) and
the rest the SDK client processes of the SDK crowd. Each store runs twice: with the
link's rate told to the scheduler (``--bandwidth``), and not told (the link paces the
same; the scheduler measures). PostgreSQL is the SDK crowd's topology (three servers
behind HAProxy) without the fault: the leader's loss is the SDK crowd's to judge.

Figures are kept per kind of client, ``sdk`` (download id) and ``curl`` (none), each
against the simulation's oracle on the arrivals the whole crowd really had.
"""

from __future__ import annotations

import itertools
import json
import math
import random
from collections import deque
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.simulation.engine import ClientSpec, oracle_completions

from arkvory_sched import PrincipalKind
from benchmarks._gate_fleet import TOKEN, Fleet
from benchmarks._gate_report import (
    Figures,
    in_seconds,
    mean,
    pct,
    told_quality,
    utilisation,
    waiting_at,
    waiting_spans,
)
from benchmarks._gate_run import Run, Workload, run_fleet, sdk_crowd, server_env

__all__ = [
    "CURL_KINDS",
    "MIX",
    "Mix",
    "idle_while_waiting",
    "mixed_figures",
    "mixed_section",
    "mixed_targets",
    "run_mixed",
]

CURL_KINDS = ("whole", "resume", "tail", "slow")
LABELS = {"sdk": "SDK (download id)", "curl": "curl (no id)"}


@dataclass(frozen=True, slots=True)
class Mix:
    """Shares of the downloads made by each kind of curl client; the rest use the SDK.

    ``hold_seconds`` is the server's hold of a request without an id (R-HOLD-1),
    compressed as the gate compresses its sessions (1.8 s, not minutes; ADR 0028): the
    default 20 s would cover eleven batches here, and most curl clients would start
    inside it, never told a start. ``pause`` parts a resume's cut from its rest.
    """

    whole: float = 0.20
    resume: float = 0.075
    tail: float = 0.075
    slow: float = 0.025
    hold_seconds: float = 2.0
    tail_bytes: int = 64 * 1024
    pause: float = 1.0

    def kinds(self, downloads: int) -> list[str]:
        """The kind of each download in arrival order: shuffled, the same every run."""
        shares = {"whole": self.whole, "resume": self.resume, "tail": self.tail}
        shares["slow"] = self.slow
        kinds = [kind for kind, share in shares.items() for _ in range(round(share * downloads))]
        kinds += ["sdk"] * (downloads - len(kinds))
        random.Random(28).shuffle(kinds)
        return kinds

    @staticmethod
    def limit_rate(workload: Workload) -> int:
        """A slow client's ``--limit-rate``: a tenth of one slot's share of the link."""
        return workload.rate // workload.slots // 10

    @staticmethod
    def retry_max_time(workload: Workload) -> int:
        """curl's ``--retry-max-time``: three times the whole crowd's transfer at the
        link's rate, and a minute; a client told to wait longer gives up, and is counted."""
        return math.ceil(3 * workload.downloads * workload.size / workload.rate + 60)


MIX = Mix()


def _address(index: int) -> str:
    """One loopback address per curl download, as each machine of a crowd has its own."""
    return f"127.1.{index // 250}.{index % 250 + 1}"


def _curl_spec(workload: Workload, files: Path, arrivals: list[float]) -> dict[str, Any]:
    kinds, rng = MIX.kinds(len(arrivals)), random.Random(2828)
    downloads = [
        {
            "arrival": arrival,
            "kind": kind,
            "address": _address(index),
            "cut": rng.randrange(workload.size // 4, 3 * workload.size // 4),  # for a resume
        }
        for index, (arrival, kind) in enumerate(zip(arrivals, kinds, strict=True))
        if kind != "sdk"
    ]
    return {
        "downloads": downloads,
        "file": str(files / "large" / "image-1.bin"),
        "limit_rate": MIX.limit_rate(workload),
        "tail_bytes": MIX.tail_bytes,
        "pause": MIX.pause,
        "retry_max_time": MIX.retry_max_time(workload),
    }


async def run_mixed(
    name: str, told: bool, workload: Workload, files: Path, root: Path, port_base: int
) -> Figures:
    """The mixed crowd through store ``name``, the link's rate ``told`` or not; its figures."""
    arrivals = workload.arrivals()
    kinds = MIX.kinds(len(arrivals))
    sdk_arrivals = [a for a, kind in zip(arrivals, kinds, strict=True) if kind == "sdk"]
    curl = _curl_spec(workload, files, arrivals)

    async def crowd(fleet: Fleet, url: str, origin: float) -> list[dict[str, Any]]:
        spec = {**curl, "url": url, "token": TOKEN, "origin": origin}
        spec["directory"] = f"/dev/shm/arkvory-gate-curl-{origin:.0f}"
        out = fleet.work / "records-curl.json"
        argv = ["-m", "benchmarks._gate_curl", json.dumps(spec), str(out)]
        fleet.clients.append(fleet.spawn(argv, "curl"))
        records = await sdk_crowd(workload, fleet, url, origin, sdk_arrivals)  # waits for all
        curled: list[dict[str, Any]] = json.loads(out.read_text())
        return [{**r, "kind": "sdk"} for r in records] + curled

    env = server_env(workload, common_practice=False)
    env["ARKVORY_DOWNLOAD_HOLD_SECONDS"] = str(MIX.hold_seconds)
    work = root / f"mixed-{name}-{'told' if told else 'untold'}"
    run = await run_fleet(
        name, work, port_base, workload, files, env, crowd, told=told, fault=False
    )
    return mixed_figures(workload, run)


def idle_while_waiting(
    records: list[dict[str, Any]], active: list[tuple[float, int]], slots: int
) -> tuple[float, float]:
    """(slot-seconds no session held while anyone waited, the longest time one slot stayed
    empty with someone waiting), from the active sessions sampled every 250 ms: a sample
    stands for the time until the next one.

    A stretch is one slot's, as the simulation counts it (``tests.simulation.idle``):
    each idle slot keeps the moment it became idle with a waiter present, and the oldest
    is the one a starting session takes. Under a fast turnover some slot is nearly always
    between two sessions; that is many short stretches, not one long one.
    """
    spans = waiting_spans(records)
    idle = longest = 0.0
    since: deque[float] = deque()
    for (t0, held), (t1, _) in itertools.pairwise(active):
        empty = max(0, slots - held) if waiting_at(spans, (t0 + t1) / 2) else 0
        while len(since) > empty:
            longest = max(longest, t0 - since.popleft())
        while len(since) < empty:
            since.append(t0)
        idle += empty * (t1 - t0)
    if active:
        longest = max([longest, *(active[-1][0] - moment for moment in since)])
    return idle, longest


def _kind(workload: Workload, group: list[tuple[dict[str, Any], float]], origin: float) -> Figures:
    """One kind's figures from its records, each with its completion in the oracle."""
    records = [r for r, _ in group]
    done = [r for r in records if r["outcome"] == "finished"]
    completions = [r["end"] - r["arrival"] for r in done]
    told, bound_p95, inside = told_quality(records, workload.size, origin)
    errors = [abs(r["start"] - r["estimate"]) for r in told]
    ideal = mean([completion for _, completion in group])
    slow = [r["end"] - r["start"] for r in done if r["kind"] == "slow"]
    return {
        "downloads": len(records),
        "kinds": {kind: sum(r["kind"] == kind for r in records) for kind in CURL_KINDS},
        "finished": len(done),
        "failed": sum(r["outcome"] == "failed" for r in records),
        "gave_up": sum(r["outcome"] == "gave_up" for r in records),
        "bytes_wrong": sum(r.get("bytes_ok") is False for r in records),
        "completion": (mean(completions), pct(completions, 0.95)),
        "ideal": ideal,
        "ratio": mean(completions) / ideal if completions else math.nan,
        "estimated": len(told),
        "answers": mean([r["queued"] for r in records]),
        "error": (pct(errors, 0.5), pct(errors, 0.95)),
        "bound_p95": bound_p95 if told else math.nan,
        "inside": inside if told else math.nan,
        "slow": (mean(slow), len(slow)),
    }


def mixed_figures(workload: Workload, run: Run) -> Figures:
    """Per kind (``sdk``, ``curl``) and for the whole run: link, idle slots, CPU."""
    specs = [
        ClientSpec("", "", PrincipalKind.SERVICE, workload.size, r["arrival"] - run.origin)
        for r in run.records
    ]
    ideal = oracle_completions(specs, workload.slots, workload.rate)
    pairs = list(zip(run.records, ideal, strict=True))
    idle, longest = idle_while_waiting(run.records, run.sampler.active, workload.slots)
    last = max((r["stop"] for r in run.records), default=run.origin)
    gib = (run.link[-1][1] - run.link[0][1]) / 1024**3 if run.link else 0.0
    return {
        "sdk": _kind(workload, [p for p in pairs if p[0]["kind"] == "sdk"], run.origin),
        "curl": _kind(workload, [p for p in pairs if p[0]["kind"] != "sdk"], run.origin),
        "downloads": len(run.records),
        "lost": sum(r["outcome"] != "finished" for r in run.records),
        "utilisation": utilisation(run.records, run.link, workload.rate),
        "idle": idle,
        "slot_seconds": workload.slots * (last - run.origin),
        "longest_idle": longest,
        "max_active": max((n for _, n in run.sampler.active), default=math.nan),
        "gib": gib,
        "cpu_per_gib": run.cpu / gib if gib else math.nan,
    }


def _run_name(name: str, told: bool) -> str:
    return f"{name}, rate {'told' if told else 'not told'}"


def mixed_targets(results: dict[tuple[str, bool], Figures]) -> list[tuple[str, bool, str]]:
    """Each target of issue #28 the gate can judge: name, verdict, the figure judged."""
    out: list[tuple[str, bool, str]] = []
    for (name, told), f in results.items():
        run = _run_name(name, told)
        lost = f"{f['lost']} did not"
        out.append((f"{run}: every download finishes, bytes right", not f["lost"], lost))
        for kind, label in LABELS.items():
            k, nobody = f[kind], "nobody was told a start"
            bound = f"{k['bound_p95']:.2f} over {k['estimated']} told" if k["estimated"] else nobody
            inside = f"{100 * k['inside']:.1f} %" if k["estimated"] else nobody
            out.append((f"{run}: {label}: p95 of error ÷ bound ≤ 1", k["bound_p95"] <= 1, bound))
            out.append((f"{run}: {label}: ≥ 90 % inside", k["inside"] >= 0.9, inside))
        share = f["idle"] / f["slot_seconds"] if f["slot_seconds"] else math.nan
        idle = f"{f['idle']:.1f} of {f['slot_seconds']:.0f} ({100 * share:.1f} %)"
        out.append((f"{run}: idle slot-seconds while anyone waits ≤ 1 %", share <= 0.01, idle))
        longest = f["longest_idle"]
        out.append((f"{run}: no idle stretch > 3 s", longest <= 3.0, f"{longest:.2f} s"))
    return out


METHOD = (
    "curl runs `--fail --retry 1000 --retry-all-errors --retry-max-time {max_time}`: curl 7.88"
    " sleeps the `Retry-After` of a `503`, and gives up when one would pass the maximum time."
    " Each curl process logs every attempt (`-v --trace-time`): what it was told is read from"
    " the headers it received (`Arkvory-Starts-At` and its interval, `Arkvory-Queue-Position`),"
    " its start is its first `2xx` status line (the SDK's `Started` is its response head too),"
    " its end the exit of its last process, and its bytes are checked against the served file"
    " (size and SHA-256; a tail read against the file's last bytes). Both kinds are scored as"
    " the simulation scores estimates: the interval of the first answer with a place, the"
    " error of the first start told on a configured or measured rate (an answer on a guessed"
    " rate says so and is judged by its interval, ADR 0042). Ideal: the"
    " simulation's oracle on the arrivals the whole crowd really had, each kind's mean over its"
    " own clients (the oracle knows no `--limit-rate`). Idle slot-seconds: from the active"
    " sessions sampled every 250 ms, the slots no session held while anyone had arrived and"
    " not yet received a byte."
)


def _row(name: str, f: Figures, value: Any) -> str:
    return f"| {name} | {value(f['sdk'])} | {value(f['curl'])} |"


def _table(f: Figures, slow_seconds: float) -> list[str]:
    def told(k: Figures) -> str:
        if not k["estimated"]:
            return "– (nobody is told one)"
        e50, e95 = map(in_seconds, k["error"])
        return f"{e50} / {e95} over {k['estimated']} told a start"

    def kinds(k: Figures) -> str:
        parts = [f"{n} {kind}" for kind, n in k["kinds"].items() if n]
        return f"{k['downloads']}" + (f" ({', '.join(parts)})" if parts else "")

    rows = [
        "| figure | SDK (download id) | curl (no id) |",
        "| --- | --- | --- |",
        _row("downloads", f, kinds),
        _row(
            "finished / failed / gave up (bytes wrong)",
            f,
            lambda k: f"{k['finished']} / {k['failed']} / {k['gave_up']} ({k['bytes_wrong']})",
        ),
        _row("completion mean / p95", f, lambda k: " / ".join(map(in_seconds, k["completion"]))),
        _row("the oracle's mean, same clients", f, lambda k: in_seconds(k["ideal"])),
        _row("mean ÷ ideal mean", f, lambda k: f"{k['ratio']:.3f}"),
        _row("503 answers with a start, per download", f, lambda k: f"{k['answers']:.1f}"),
        _row("start-estimate error p50 / p95", f, told),
        _row(
            "p95 of error ÷ max(10 % of the wait, 2 s)",
            f,
            lambda k: f"{k['bound_p95']:.2f}" if k["estimated"] else "–",
        ),
        _row(
            "starts inside the announced interval",
            f,
            lambda k: f"{100 * k['inside']:.1f} %" if k["estimated"] else "–",
        ),
        _row(
            f"`--limit-rate` clients, first byte to end (at the limit: {slow_seconds:.1f} s)",
            f,
            lambda k: f"{in_seconds(k['slow'][0])} ({k['slow'][1]})" if k["slow"][1] else "–",
        ),
    ]
    share = f["idle"] / f["slot_seconds"] if f["slot_seconds"] else math.nan
    return [
        *rows,
        "",
        f"The link carried {100 * f['utilisation']:.1f} % of its rate while anyone waited;"
        f" {f['idle']:.1f} slot-seconds idle while anyone waited ({100 * share:.1f} % of"
        f" {f['slot_seconds']:.0f}), the longest stretch {f['longest_idle']:.2f} s; at most"
        f" {f['max_active']} sessions active; server CPU {f['cpu_per_gib']:.2f} s per GiB"
        f" ({f['gib']:.2f} GiB).",
        "",
    ]


def mixed_section(
    workload: Workload,
    mix: Mix,
    results: dict[tuple[str, bool], Figures],
    verdicts: list[tuple[str, bool, str]],
    command: str,
    machine: str,
    started: datetime,
) -> str:
    """The section of RESULTS.md: the crowd, one table per store and rate, the targets."""
    w, kinds = workload, mix.kinds(workload.downloads)
    count = {kind: kinds.count(kind) for kind in ("sdk", *CURL_KINDS)}
    curl = w.downloads - count["sdk"]
    limit = mix.limit_rate(w)
    lines = [
        "## The gate: a mixed crowd of SDK and curl clients (issue #28)",
        "",
        f"`{command}` (in `make bench-gate`), {started:%Y-%m-%d %H:%M} UTC; {machine}."
        f" {w.downloads} downloads of one {w.size >> 20} MiB object, arrivals uniform over the"
        f" first {w.spread:.0f} s: {count['sdk']} by the async SDK ({w.range_size >> 20} MiB"
        f" ranges, {w.processes} processes) and {curl} ({100 * curl / w.downloads:.0f} %) by"
        f" Debian's curl 7.88, one loopback address each and no download id:"
        f" {count['whole']} whole-file GETs, {count['resume']} resumed from the middle (`--range"
        f" 0-N`, then {mix.pause:.0f} s later `-C -`), {count['tail']} reading the last"
        f" {mix.tail_bytes >> 10} KiB first (`--range -{mix.tail_bytes}`, then the whole), and"
        f" {count['slow']} whole at `--limit-rate {limit}` (a tenth of a slot's share)."
        f" One {w.rate >> 20} MiB/s link shared by the fleet, {w.slots} session slots, requests"
        f" without an id held {mix.hold_seconds:.0f} s (`ARKVORY_DOWNLOAD_HOLD_SECONDS`, scaled"
        f" like the sessions: 20 s would cover eleven batches here). Each store twice: the"
        " link's rate told (`--bandwidth`), and not told (the link paces the same; the"
        " scheduler measures). PostgreSQL: three servers behind HAProxy (`option forwardfor`"
        " carries each client's address), no fault.",
        "",
        METHOD.format(max_time=mix.retry_max_time(w)),
        "",
    ]
    for (name, told), f in results.items():
        lines += [f"### {_run_name(name, told)}", "", *_table(f, w.size / limit)]
    lines += ["### Targets (issue #28)", "", "| target | measured | result |"]
    lines += ["| --- | --- | --- |"]
    lines += [f"| {n} | {m} | {'PASS' if ok else '**FAIL**'} |" for n, ok, m in verdicts]
    return "\n".join(lines) + "\n"
