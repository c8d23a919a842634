"""The markdown section ``pg_scale`` writes: both stores side by side at each size.

Every figure stands next to one measured in the same run, the in-memory store at the
same size or the smaller size of the run, because the machine is shared and absolute
times move with its load. The goals are checked at the largest size.
"""

from __future__ import annotations

import datetime
import math
import platform
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from benchmarks._machine import cpu_count, cpu_model
from benchmarks._report import format_ms, format_ratio, package_version, source_revision, verdict
from benchmarks._scale_figures import SizeRun, StoreRun, p50, p99, ratio

__all__ = ["ScaleRun", "goal_rows", "heading", "problems", "render"]

POLL_P50_GOAL_MS: Final = 2.0
POLL_P99_GOAL_MS: Final = 5.0
LAST_FIRST_GOAL: Final = 1.5
NEWCOMER_GROWTH_GOAL: Final = 1.5  # newcomer p99 at the largest size ÷ at the smallest
RANGE_GOAL: Final = 2.0  # range admission, PostgreSQL ÷ in memory (median)
TICK_GOAL_MS: Final = 100.0
GROWTH_SHARE: Final = 0.1  # the tick grows by at most a tenth of the queue's growth
POSITIONS: Final = ("first", "middle", "last")


@dataclass(slots=True)
class ScaleRun:
    sizes: list[SizeRun] = field(default_factory=list)
    server_version: str = "unknown"
    server_settings: dict[str, str] = field(default_factory=dict)
    effort: str = ""
    seed: int = 0


def heading(sizes: Sequence[int]) -> str:
    """One section per set of sizes, so a run at 65,536 does not replace the million's."""
    names = [f"{size:,}" for size in sizes]
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return f"## PostgreSQL queue length: {listed} waiting"


def _ms(seconds: Sequence[float], statistic: str) -> float:
    if not seconds:
        return math.nan
    return 1000 * (p50(seconds) if statistic == "p50" else p99(seconds))


def _poll(store: StoreRun | None, position: str, statistic: str) -> float:
    if store is None or position not in store.clients.polls:
        return math.nan
    return _ms(store.clients.polls[position].seconds, statistic)


def _newcomer(store: StoreRun | None, statistic: str) -> float:
    return math.nan if store is None else _ms(store.clients.newcomer_seconds, statistic)


def _range(store: StoreRun | None, statistic: str) -> float:
    return math.nan if store is None else _ms(store.clients.range_seconds, statistic)


def _tick(store: StoreRun | None, statistic: str) -> float:
    return math.nan if store is None else _ms([t.seconds for t in store.ticks], statistic)


def goal_rows(run: ScaleRun) -> list[str]:
    rows = ["| goal | measured | result |", "| --- | --- | --- |"]
    low, top = run.sizes[0], run.sizes[-1]
    where = f"at {top.waiting:,} waiting"
    pg = top.postgres
    p50s = [_poll(pg, name, "p50") for name in POSITIONS]
    p99s = [_poll(pg, name, "p99") for name in POSITIONS]
    spread = ratio(p50s[-1], p50s[0])
    ranges = ratio(_range(pg, "p50"), _range(top.memory, "p50"))
    tick = _tick(pg, "p50")
    rows += [
        f"| poll p50 ≤ {POLL_P50_GOAL_MS:g} ms at the first, middle and last position, {where} "
        f"| {' / '.join(map(format_ms, p50s))} | {verdict(max(p50s) <= POLL_P50_GOAL_MS)} |",
        f"| poll p99 ≤ {POLL_P99_GOAL_MS:g} ms, {where} | {' / '.join(map(format_ms, p99s))} "
        f"| {verdict(max(p99s) <= POLL_P99_GOAL_MS)} |",
        f"| the last position's poll within {LAST_FIRST_GOAL:g}× the first's (p50), {where} "
        f"| {format_ratio(spread)} | {verdict(spread <= LAST_FIRST_GOAL)} |",
        f"| range admission of an active session ≤ {RANGE_GOAL:g}× in memory (median), {where} "
        f"| {format_ratio(ranges)} | {verdict(ranges <= RANGE_GOAL)} |",
        f"| leader's tick in steady churn, median ≤ {TICK_GOAL_MS:g} ms, {where} "
        f"| {format_ms(tick)} | {verdict(tick <= TICK_GOAL_MS)} |",
    ]
    if top.waiting > low.waiting:
        queue = top.waiting / low.waiting
        newcomer = ratio(_newcomer(pg, "p99"), _newcomer(low.postgres, "p99"))
        growth = ratio(tick, _tick(low.postgres, "p50"))
        allowed = GROWTH_SHARE * queue
        rows += [
            f"| newcomer p99 at {top.waiting:,} ≤ {NEWCOMER_GROWTH_GOAL:g}× at {low.waiting:,} "
            f"| {format_ratio(newcomer)} | {verdict(newcomer <= NEWCOMER_GROWTH_GOAL)} |",
            f"| the tick grows far slower than the queue ({low.waiting:,} → {top.waiting:,}: "
            f"≤ {allowed:.1f}×) | {format_ratio(growth)} | {verdict(growth <= allowed)} |",
        ]
    return rows


def size_rows(run: ScaleRun) -> list[str]:
    rows = [
        "| waiting | store | poll p50, first / middle / last | poll p99 | newcomer p50 / p99 "
        "| range admission p50 / p99 | tick median / p99 |",
        "| ---: | --- | --- | --- | --- | --- | --- |",
    ]
    for size in run.sizes:
        figures: dict[str, list[float]] = {}
        for store in (size.postgres, size.memory):
            if store is None:
                continue
            values = [_poll(store, n, s) for s in ("p50", "p99") for n in POSITIONS]
            values += [_newcomer(store, "p50"), _newcomer(store, "p99")]
            values += [_range(store, "p50"), _range(store, "p99")]
            values += [_tick(store, "p50"), _tick(store, "p99")]
            figures[store.store] = values
        if len(figures) == 2:
            pg, memory = figures.values()
            figures["PostgreSQL ÷ in memory"] = [
                ratio(a, b) for a, b in zip(pg, memory, strict=True)
            ]
        for name, values in figures.items():
            cells = [(format_ratio if "÷" in name else format_ms)(x) for x in values]
            rows.append(
                f"| {size.waiting:,} | {name} | {' / '.join(cells[0:3])} "
                f"| {' / '.join(cells[3:6])} | {' / '.join(cells[6:8])} "
                f"| {' / '.join(cells[8:10])} | {' / '.join(cells[10:12])} |"
            )
    return rows


def problems(run: ScaleRun) -> list[str]:
    """What makes the run's figures wrong rather than slow: answers of the wrong kind,
    in-memory positions other than the fill's service order (the fill's turns would be
    wrong), a first waiter not answered position 1 (exact there, whatever the store)."""
    found: list[str] = []
    for size in run.sizes:
        for store in (size.memory, size.postgres):
            if store is None:
                continue
            clients, where = store.clients, f"{store.store} at {size.waiting:,}"
            odd = (
                sum(p.unexpected for p in clients.polls.values())
                + clients.newcomer_unexpected
                + clients.range_unexpected
                + clients.churn.unexpected
            )
            if odd:
                found.append(f"{where}: {odd} answers of an unexpected kind")
            for polls in clients.polls.values():
                exact = polls.label == "first" or store.store == "in memory"
                if exact and any(p != polls.expected for p in polls.positions):
                    found.append(f"{where}: the {polls.label} waiter's position is wrong")
    return found


def render(run: ScaleRun, argv: Sequence[str], wall: float, loads: str) -> str:
    now = datetime.datetime.now(datetime.UTC)
    command = shlex.join(["python", "-m", "benchmarks.pg_scale", *argv])
    settings = run.server_settings
    churn = "; ".join(
        f"{size.waiting:,}: {store.clients.churn.steps} steps "
        f"({store.clients.churn.late_steps} late), {store.clients.churn.claims} claims, "
        f"{len(store.ticks)} leader ticks ({size.lost_leads} failed)"
        for size in run.sizes
        if (store := size.postgres) is not None
    )
    lines = [
        heading([size.waiting for size in run.sizes]),
        "",
        f"- Command: `{command}`, at commit {source_revision()}; whole run {wall:.0f} s",
        f"- Machine: {cpu_count()} CPUs, {cpu_model()}, {platform.system()} "
        f"{platform.release()}; PostgreSQL {run.server_version} on the same machine "
        f"(shared_buffers {settings.get('shared_buffers')}, synchronous_commit "
        f"{settings.get('synchronous_commit')}); CPython {platform.python_version()}, "
        f"asyncpg {package_version('asyncpg')}",
        f"- Date: {now:%Y-%m-%d %H:%M} UTC; load average before / after: {loads}",
        f"- Workload: 16 slots held, one class (release), {run.effort}; far-back waiters "
        f"seeded with {run.seed}; benchmarks/README.md. PostgreSQL churn: {churn}",
        "",
        *goal_rows(run),
        "",
        *size_rows(run),
        "",
    ]
    return "\n".join(lines)
