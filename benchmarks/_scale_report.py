"""The markdown section ``pg_scale`` writes: issue #17's figures side by side.

Every figure stands next to a ratio measured in the same run — against the in-memory
store at the same size, or against the empty queue (size 0, the run's first) — because
the machine is shared and absolute times move with its load. The issue's goals are
checked at the largest size of the run.
"""

from __future__ import annotations

import datetime
import math
import platform
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from benchmarks._machine import cpu_count, cpu_model, median
from benchmarks._report import (
    format_ms,
    format_ratio,
    format_us,
    package_version,
    source_revision,
    verdict,
)
from benchmarks._scale_figures import SizeRun, StoreRun, p50, p99, ratio
from benchmarks.core_bench import GROWTH_SHARE

__all__ = ["ScaleRun", "heading", "problems", "render", "target_rows", "tick_statement_rows"]

KIB: Final = 1024
MIB: Final = 1024 * KIB
POLL_P50_GOAL_MS: Final = 2.0
POLL_P99_GOAL_MS: Final = 5.0
LAST_FIRST_GOAL: Final = 1.5
NEWCOMER_GOAL: Final = 1.5  # p99 ÷ the empty queue's p99
TICK_GOAL_MS: Final = 100.0
SIZE_GOAL_BYTES: Final = 1.5 * KIB
FLAT_GOAL: Final = 1.25  # a process's peak RSS ÷ its peak on the empty queue
POSITIONS: Final = ("first", "middle", "last")


@dataclass(slots=True)
class ScaleRun:
    sizes: list[SizeRun] = field(default_factory=list)
    phases: list[tuple[str, float]] = field(default_factory=list)
    server_version: str = "unknown"
    server_settings: dict[str, str] = field(default_factory=dict)
    effort: str = ""
    seed: int = 0
    label: str = ""

    @property
    def empty(self) -> SizeRun | None:
        return next((s for s in self.sizes if s.waiting == 0), None)

    @property
    def filled(self) -> list[SizeRun]:
        return [s for s in self.sizes if s.waiting > 0]


def heading(sizes: Sequence[int], label: str = "") -> str:
    """The section's heading: one section per set of sizes (and label), so a run at
    65,536 does not replace one at the million."""
    names = [f"{size:,}" for size in sizes]
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    suffix = f" ({label})" if label else ""
    return f"## PostgreSQL queue length: {listed} waiting{suffix}"


def _ms_of(seconds: Sequence[float], statistic: str) -> float:
    value = p50(seconds) if statistic == "p50" else p99(seconds)
    return 1000 * value


def _poll_ms(store: StoreRun | None, position: str, statistic: str) -> float:
    if store is None or position not in store.clients.polls:
        return math.nan
    return _ms_of(store.clients.polls[position].seconds, statistic)


def _newcomer_ms(store: StoreRun | None, statistic: str) -> float:
    if store is None:
        return math.nan
    return _ms_of(store.clients.newcomer_seconds, statistic)


def _tick_ms(store: StoreRun | None, statistic: str) -> float:
    if store is None or not store.ticks:
        return math.nan
    values = store.tick_ms
    return median(values) if statistic == "p50" else p99(values)


def _mib(value: float) -> str:
    return f"{value / MIB:,.1f} MiB"


# ====================================================================== targets
def target_rows(run: ScaleRun) -> list[str]:
    rows = ["| goal (issue #17) | measured | result |", "| --- | --- | --- |"]
    if not run.filled:
        return [*rows, "| – | no filled queue measured | – |"]
    top, empty = run.filled[-1], run.empty
    where = f"at {top.waiting:,} waiting"
    pg = top.postgres
    p50s = {name: _poll_ms(pg, name, "p50") for name in POSITIONS}
    p99s = {name: _poll_ms(pg, name, "p99") for name in POSITIONS}
    worst50, worst99 = max(p50s.values()), max(p99s.values())
    rows.append(
        f"| poll p50 ≤ {POLL_P50_GOAL_MS:g} ms at the first, middle and last position, {where} "
        f"| {' / '.join(format_ms(p50s[n]) for n in POSITIONS)} "
        f"| {verdict(worst50 <= POLL_P50_GOAL_MS)} |"
    )
    rows.append(
        f"| poll p99 ≤ {POLL_P99_GOAL_MS:g} ms, {where} "
        f"| {' / '.join(format_ms(p99s[n]) for n in POSITIONS)} "
        f"| {verdict(worst99 <= POLL_P99_GOAL_MS)} |"
    )
    spread = ratio(p50s["last"], p50s["first"])
    rows.append(
        f"| the last position's poll within {LAST_FIRST_GOAL:g}× the first's (p50), {where} "
        f"| {format_ratio(spread)} | {verdict(spread <= LAST_FIRST_GOAL)} |"
    )
    base = _newcomer_ms(empty.postgres if empty else None, "p99")
    newcomer = ratio(_newcomer_ms(pg, "p99"), base)
    rows.append(
        f"| newcomer p99 ≤ {NEWCOMER_GOAL:g}× its p99 on the empty queue, {where} "
        f"| {format_ms(_newcomer_ms(pg, 'p99'))} vs {format_ms(base)} = "
        f"{format_ratio(newcomer)} | {verdict(newcomer <= NEWCOMER_GOAL)} |"
    )
    trips = max((s.postgres.clients.range_statements for s in run.sizes if s.postgres), default=0)
    rows.append(
        f"| range admission of an active session: no database round trip, every size "
        f"| {trips} statements | {verdict(trips == 0)} |"
    )
    tick = _tick_ms(pg, "p50")
    rows.append(
        f"| leader's tick in steady churn, median ≤ {TICK_GOAL_MS:g} ms, {where} "
        f"| {format_ms(tick)} | {verdict(tick <= TICK_GOAL_MS)} |"
    )
    if len(run.filled) > 1:
        low = run.filled[0]
        growth = ratio(tick, _tick_ms(low.postgres, "p50"))
        queue = top.waiting / low.waiting
        allowed = GROWTH_SHARE * queue
        rows.append(
            f"| the tick grows far slower than the queue ({low.waiting:,} → {top.waiting:,}: "
            f"≤ {GROWTH_SHARE:g} × {queue:.0f} = {allowed:.1f}×) | {format_ratio(growth)} "
            f"| {verdict(growth <= allowed)} |"
        )
    per = top.extras.database_bytes / top.waiting
    rows.append(
        f"| database size per waiting session (tables + indexes) ≤ {SIZE_GOAL_BYTES:,.0f} B, "
        f"{where} | {per:,.0f} B | {verdict(per <= SIZE_GOAL_BYTES)} |"
    )
    if empty is not None and empty.extras.rss:
        growths = {
            name: ratio(peak, empty.extras.rss.get(name, (0, 0))[1])
            for name, (_, peak) in top.extras.rss.items()
        }
        text = "; ".join(f"{name} {format_ratio(value)}" for name, value in growths.items())
        rows.append(
            f"| each server process's memory flat in the queue's length (peak RSS ≤ "
            f"{FLAT_GOAL:g}× the empty queue's), {where} | {text} "
            f"| {verdict(all(v <= FLAT_GOAL for v in growths.values()))} |"
        )
    return rows


# ====================================================================== tables
def poll_rows(run: ScaleRun) -> list[str]:
    rows = [
        "| waiting | position | PostgreSQL p50 | p99 | in memory p50 | p99 "
        "| PostgreSQL ÷ in memory p50 / p99 | positions answered (PostgreSQL / in memory) "
        "| statements per poll |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: |",
    ]
    for size in run.filled:
        pg, memory = size.postgres, size.memory
        for name in POSITIONS:
            polls = pg.clients.polls.get(name) if pg else None
            mem = memory.clients.polls.get(name) if memory else None
            if polls is None:
                continue
            values = [_poll_ms(s, name, k) for s in (pg, memory) for k in ("p50", "p99")]
            per = polls.statements / max(1, len(polls.seconds))
            rows.append(
                f"| {size.waiting:,} | {name} ({polls.expected:,}) "
                f"| {' | '.join(format_ms(v) for v in values)} "
                f"| {format_ratio(ratio(values[0], values[2]))} / "
                f"{format_ratio(ratio(values[1], values[3]))} "
                f"| {polls.answered} / {mem.answered if mem else '–'} | {per:.1f} |"
            )
        spreads = [
            ratio(_poll_ms(store, "last", "p50"), _poll_ms(store, "first", "p50"))
            for store in (pg, memory)
        ]
        rows.append(
            f"| {size.waiting:,} | last ÷ first (p50) | {format_ratio(spreads[0])} "
            f"| | {format_ratio(spreads[1])} | | | | |"
        )
    return rows


def newcomer_rows(run: ScaleRun) -> list[str]:
    rows = [
        "| waiting | PostgreSQL p50 | p99 | p99 ÷ empty queue's | in memory p50 | p99 "
        "| p99 ÷ empty queue's | PostgreSQL ÷ in memory (p99) | statements per newcomer |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    empty = run.empty
    bases = [_newcomer_ms(empty.postgres if empty else None, "p99")]
    bases.append(_newcomer_ms(empty.memory if empty else None, "p99"))
    for size in run.sizes:
        pg, memory = size.postgres, size.memory
        pg50, pg99 = _newcomer_ms(pg, "p50"), _newcomer_ms(pg, "p99")
        mem50, mem99 = _newcomer_ms(memory, "p50"), _newcomer_ms(memory, "p99")
        count = len(pg.clients.newcomer_seconds) if pg else 0
        per = pg.clients.newcomer_statements / max(1, count) if pg else math.nan
        rows.append(
            f"| {size.waiting:,} | {format_ms(pg50)} | {format_ms(pg99)} "
            f"| {format_ratio(ratio(pg99, bases[0]))} | {format_ms(mem50)} | {format_ms(mem99)} "
            f"| {format_ratio(ratio(mem99, bases[1]))} | {format_ratio(ratio(pg99, mem99))} "
            f"| {per:.1f} |"
        )
    return rows


def range_rows(run: ScaleRun) -> list[str]:
    rows = [
        "| waiting | PostgreSQL median | p99 | in memory median | p99 "
        "| PostgreSQL ÷ in memory (median) | database statements (all range admissions) |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for size in run.sizes:
        values = []
        for store in (size.postgres, size.memory):
            seconds = store.clients.range_seconds if store else []
            values += [1e6 * p50(seconds), 1e6 * p99(seconds)]
        trips = size.postgres.clients.range_statements if size.postgres else 0
        count = len(size.postgres.clients.range_seconds) if size.postgres else 0
        rows.append(
            f"| {size.waiting:,} | {' | '.join(format_us(v) for v in values)} "
            f"| {format_ratio(ratio(values[0], values[2]))} | {trips} of {count:,} calls |"
        )
    return rows


def tick_rows(run: ScaleRun) -> list[str]:
    rows = [
        "| waiting | PostgreSQL median | p99 "
        "| leader ticks (failed; failed in the size's whole run) | ÷ the empty queue's (median) "
        "| in memory median | p99 | ÷ the empty queue's | PostgreSQL ÷ in memory (median) "
        "| marked / expired per tick (PostgreSQL) "
        "| growth from the previous size (PostgreSQL / in memory) |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    empty = run.empty
    bases = [_tick_ms(empty.postgres if empty else None, "p50")]
    bases.append(_tick_ms(empty.memory if empty else None, "p50"))
    previous: SizeRun | None = None
    for size in run.sizes:
        pg, memory = size.postgres, size.memory
        ticks = pg.ticks if pg else []
        count = len(ticks)
        marked = sum(t.marked for t in ticks) / max(1, count)
        expired = sum(t.expired for t in ticks) / max(1, count)
        pg50, pg99 = _tick_ms(pg, "p50"), _tick_ms(pg, "p99")
        mem50, mem99 = _tick_ms(memory, "p50"), _tick_ms(memory, "p99")
        growth = "–"
        if previous is not None and previous.waiting:
            grew = [ratio(pg50, _tick_ms(previous.postgres, "p50"))]
            grew.append(ratio(mem50, _tick_ms(previous.memory, "p50")))
            growth = (
                f"{format_ratio(grew[0])} / {format_ratio(grew[1])} "
                f"(queue {size.waiting / previous.waiting:.0f}×)"
            )
        previous = size
        rows.append(
            f"| {size.waiting:,} | {format_ms(pg50)} | {format_ms(pg99)} "
            f"| {count} ({sum(t.lost for t in ticks)}; {size.extras.lost_leads}) "
            f"| {format_ratio(ratio(pg50, bases[0]))} | {format_ms(mem50)} | {format_ms(mem99)} "
            f"| {format_ratio(ratio(mem50, bases[1]))} | {format_ratio(ratio(pg50, mem50))} "
            f"| {marked:.1f} / {expired:.1f} | {growth} |"
        )
    return rows


def tick_statement_rows(run: ScaleRun) -> list[str]:
    """Where the leader's ticks of the measured window spent their time, by statement."""
    rows = [
        "| waiting | statements: mean ms per tick (the most in one tick) "
        "| the slowest tick: its largest statements |",
        "| ---: | --- | --- |",
    ]
    for size in run.sizes:
        ticks = size.postgres.ticks if size.postgres else []
        if not ticks:
            continue
        totals: dict[str, float] = {}
        most: dict[str, float] = {}
        for tick in ticks:
            for name, ms in tick.statements.items():
                totals[name] = totals.get(name, 0.0) + ms
                most[name] = max(most.get(name, 0.0), ms)
        top = sorted(totals, key=lambda name: -totals[name])[:5]
        spent = "; ".join(
            f"`{name}` {format_ms(totals[name] / len(ticks))} ({format_ms(most[name])})"
            for name in top
        )
        slowest = max(ticks, key=lambda tick: tick.seconds)
        parts = sorted(slowest.statements.items(), key=lambda item: -item[1])[:3]
        worst = f"{format_ms(1000 * slowest.seconds)}: " + "; ".join(
            f"`{name}` {format_ms(ms)}" for name, ms in parts
        )
        rows.append(f"| {size.waiting:,} | {spent} | {worst} |")
    return rows


def churn_rows(run: ScaleRun) -> list[str]:
    rows = [
        "| waiting | store | steps (late) | claims | completions | newcomers | polls "
        "| poll p50 by kind | yielded | unexpected answers |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |",
    ]
    for size in run.sizes:
        for store in (size.postgres, size.memory):
            if store is None:
                continue
            churn = store.clients.churn
            kinds = "; ".join(
                f"{kind} {format_ms(1000 * p50(values))}" for kind, values in churn.polls.items()
            )
            rows.append(
                f"| {size.waiting:,} | {store.store} | {churn.steps} ({churn.late_steps}) "
                f"| {churn.claims} | {churn.completions} | {churn.newcomers} "
                f"| {churn.poll_count():,} | {kinds} | {churn.yielded} | {churn.unexpected} |"
            )
    return rows


def size_rows(run: ScaleRun) -> list[str]:
    rows = [
        "| waiting | tables + indexes | per waiting session | beyond the empty queue, per "
        "waiting session | largest relations |",
        "| ---: | ---: | ---: | ---: | --- |",
    ]
    empty = run.empty.extras.database_bytes if run.empty else 0
    for size in run.sizes:
        total = size.extras.database_bytes
        per = f"{total / size.waiting:,.0f} B" if size.waiting else "–"
        beyond = f"{(total - empty) / size.waiting:,.0f} B" if size.waiting else "–"
        largest = ", ".join(f"`{name}` {_mib(value)}" for name, value in size.extras.relations[:5])
        rows.append(f"| {size.waiting:,} | {_mib(total)} | {per} | {beyond} | {largest} |")
    return rows


def memory_rows(run: ScaleRun) -> list[str]:
    rows = [
        "| waiting | process | RSS at the end | peak RSS | peak ÷ the empty queue's "
        "| led the measured ticks |",
        "| ---: | --- | ---: | ---: | ---: | --- |",
    ]
    empty = run.empty
    for size in run.sizes:
        for name, (rss, peak) in size.extras.rss.items():
            base = empty.extras.rss.get(name, (0, 0))[1] if empty else 0
            led = "yes" if name in size.extras.leaders else "no"
            rows.append(
                f"| {size.waiting:,} | {name} | {_mib(rss)} | {_mib(peak)} "
                f"| {format_ratio(ratio(peak, base))} | {led} |"
            )
    return rows


def explain_rows(run: ScaleRun) -> list[str]:
    rows = [
        "| waiting | first: execution | buffers hit / read | middle | buffers | last | buffers |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for size in run.filled:
        cells = []
        for name in POSITIONS:
            ms, hit, read = size.extras.explain.get(name, (math.nan, 0, 0))
            cells += [format_ms(ms), f"{hit:,} / {read:,}"]
        rows.append(f"| {size.waiting:,} | {' | '.join(cells)} |")
    return rows


# ====================================================================== checks
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
                    found.append(
                        f"{where}: the {polls.label} waiter was answered {polls.answered}, "
                        f"not {polls.expected:,}"
                    )
    return found


# ====================================================================== section
def render(
    run: ScaleRun, title: str, argv: Sequence[str], wall: float, loads: tuple[str, str]
) -> str:
    now = datetime.datetime.now(datetime.UTC)
    command = shlex.join(["python", "-m", "benchmarks.pg_scale", *argv])
    settings = run.server_settings
    details = [f"{name} {seconds:.0f} s" for name, seconds in run.phases]
    fills = "; ".join(
        f"{size.waiting:,}: `COPY` {size.extras.copy_seconds:.0f} s, `VACUUM (ANALYZE)` "
        f"{size.extras.vacuum_seconds:.0f} s, check {size.extras.check_seconds:.0f} s; in memory "
        f"{size.memory.fill_seconds if size.memory else math.nan:.0f} s"
        for size in run.filled
    )
    lines = [
        title,
        "",
        f"- Command: `.venv/bin/{command}` (from the project root), at commit {source_revision()}",
        f"- Machine: {cpu_count()} CPUs (`nproc`), {cpu_model()}, {platform.system()} "
        f"{platform.release()}; PostgreSQL {run.server_version} on the same machine "
        f"(shared_buffers {settings.get('shared_buffers')}, synchronous_commit "
        f"{settings.get('synchronous_commit')})",
        f"- Python: {platform.python_implementation()} {platform.python_version()}, asyncpg "
        f"{package_version('asyncpg')}",
        f"- Date: {now:%Y-%m-%d %H:%M} UTC; whole run {wall:.0f} s; load average "
        f"(1 / 5 / 15 min) {loads[0]} before, {loads[1]} after",
        f"- Settings: sessions=16 (15 release slots held, 1 reserved held by an interactive "
        f"download), queue_limit=1,048,576, queue_per_principal=4,096, ordered, tickets on; "
        f"one class (release); {run.effort}; far-back sample seeded with {run.seed}. "
        'See `benchmarks/README.md` ("PostgreSQL at scale") for the workload.',
        "",
        "### Goals",
        "",
        *target_rows(run),
        "",
        "### 1. A waiting client's poll (`admit` of a queued session: position, estimate, ticket)",
        "",
        *poll_rows(run),
        "",
        "### 2. Newcomer admission (joins at the end of the queue)",
        "",
        *newcomer_rows(run),
        "",
        "### 3. Range admission of an active session",
        "",
        *range_rows(run),
        "",
        "### 4. The leader's tick in steady churn",
        "",
        *tick_rows(run),
        "",
        *tick_statement_rows(run),
        "",
        *churn_rows(run),
        "",
        "### 5. Database size (all tables of the schema, with their indexes)",
        "",
        *size_rows(run),
        "",
        "### 6. Server processes' memory",
        "",
        *memory_rows(run),
        "",
        "### The poll's `POSITION` statement, `EXPLAIN (ANALYZE, BUFFERS)` after the fill",
        "",
        *explain_rows(run),
        "",
        "### Run details",
        "",
        "- Phases: " + "; ".join(details),
        f"- Fills: {fills}",
        "",
    ]
    return "\n".join(lines)
