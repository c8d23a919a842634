"""The figures of ``benchmarks.pg_polls`` and their section of RESULTS.md.

A period's figures are the three processes' together (:func:`merge`) beside what the
parent saw of the database over the same period (:class:`Database`). Intervals are the
lowest and highest of the periods of one kind: on a shared two-CPU machine a single
figure would hide how much the load moved it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import median

from benchmarks._pg_polls_node import SHORT, Period
from benchmarks._report import quantile, verdict

P99_RATIO_GOAL = 1.2  # the well-behaved polls' p99, storm ÷ quiet
ANSWER_P99_GOAL_MS = 5.0  # figure 2: every answer's p99 below this at the step
ACHIEVED_SHARE = 0.98  # figure 2: the step keeps up when it answers this much of the offer


@dataclass(frozen=True, slots=True)
class Database:
    """What the parent saw over one period: CPU seconds of the benchmark's own backends
    and of every ``postgres`` process (the whole server, other work on it included),
    transactions the database counted, and the load average at the end."""

    ours: float
    server: float
    transactions: int
    load: float


def merge(periods: Sequence[Period]) -> Period:
    """The periods of several processes (or several periods) as one."""
    merged = Period()
    for period in periods:
        for kind, seconds in period.seconds.items():
            merged.seconds.setdefault(kind, []).extend(seconds)
        merged.lags.extend(period.lags)
        for name in ("calls", "local", "statements", "unexpected", "storage_errors"):
            counter: Counter[str] = getattr(merged, name)
            counter.update(getattr(period, name))
        merged.cpu += period.cpu
    return merged


def ms(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    return 1000 * (median(values) if q == 0.5 else quantile(values, q))


def span(values: Sequence[float], form: str) -> str:
    """``low–high`` of the periods, or the one value."""
    low, high = min(values), max(values)
    return format(low, form) if low == high else f"{format(low, form)}–{format(high, form)}"


# ====================================================================== figure 1
@dataclass(slots=True)
class StormRun:
    """Figure 1: per block (all nodes merged), which blocks stormed, and the database."""

    blocks: list[Period]
    database: list[Database]
    storm: frozenset[int]
    block_s: float
    waiters: int
    stormers: int

    def of(self, storming: bool) -> list[int]:
        return [n for n in range(len(self.blocks)) if (n in self.storm) == storming]


def _storm_column(run: StormRun, storming: bool) -> dict[str, str]:
    """One column of figure 1's table: the blocks with (or without) the storm."""
    blocks = [run.blocks[n] for n in run.of(storming)]
    dbs = [run.database[n] for n in run.of(storming)]
    every = merge(blocks)
    seconds = run.block_s * len(blocks)

    def per_s(counter: Counter[str], *kinds: str) -> float:
        return sum(counter[kind] for kind in kinds or counter) / seconds

    def spread(values: list[float], form: str) -> str:
        return format(values[0], form) if len(values) == 1 else span(values, form)

    stormers, short = ("stormer", SHORT), (SHORT,)
    store = Counter({kind: every.calls[kind] - every.local[kind] for kind in stormers})
    calls, here = (sum(counter[k] for k in stormers) for counter in (every.calls, every.local))
    waiter = every.seconds.get("waiter", [])
    block_rates = [sum(b.statements.values()) / run.block_s for b in blocks]
    block_p99s = [ms(b.seconds.get("waiter", []), 0.99) for b in blocks]
    return {
        "statements/s reaching PostgreSQL, all (per block)": (
            f"{per_s(every.statements):,.0f} ({spread(block_rates, ',.0f')})"
        ),
        "… from the well-behaved waiters' polls": f"{per_s(every.statements, 'waiter'):,.0f}",
        f"… from the {run.stormers} storming clients' polls": (
            f"{per_s(every.statements, *stormers):,.0f}"
        ),
        "… ticks, slot holders, connections": (
            f"{per_s(every.statements, 'tick', 'holder', 'server'):,.0f}"
        ),
        "transactions/s the database counted (pg_stat_database: all its clients)": (
            f"{sum(d.transactions for d in dbs) / seconds:,.0f}"
        ),
        "well-behaved polls/s": f"{per_s(every.calls, 'waiter'):,.0f}",
        "well-behaved poll p50 / p99 (per block p99)": (
            f"{ms(waiter, 0.5):.2f} / {ms(waiter, 0.99):.2f} ms ({spread(block_p99s, '.2f')})"
        ),
        "storming clients' polls/s; answered by the process, no statement": (
            f"{per_s(every.calls, *stormers):,.0f}; {100 * here / max(1, calls):.1f} %"
        ),
        "storming clients' polls that reached PostgreSQL /s (statements each)": (
            f"{per_s(store):,.1f} "
            f"({sum(every.statements[k] for k in stormers) / max(1, sum(store.values())):.2f})"
        ),
        "… of them after `Retry-After: 1` (the head, marked waiters) /s (statements each)": (
            f"{per_s(store, *short):,.1f} ({every.statements[SHORT] / max(1, store[SHORT]):.2f})"
        ),
        "PostgreSQL CPU, the benchmark's backends / whole server (cores)": (
            f"{sum(d.ours for d in dbs) / seconds:.2f} / {sum(d.server for d in dbs) / seconds:.2f}"
        ),
        "the three server processes' CPU (cores)": f"{every.cpu / seconds:.2f}",
        "load average, 1 min, at the blocks' ends": spread([d.load for d in dbs], ".2f"),
    }


def storm_p99_ratio(run: StormRun) -> float:
    quiet, storm = (merge([run.blocks[n] for n in run.of(s)]) for s in (False, True))
    return ms(storm.seconds.get("waiter", []), 0.99) / ms(quiet.seconds.get("waiter", []), 0.99)


def storm_rows(run: StormRun) -> list[str]:
    quiet, storm = _storm_column(run, False), _storm_column(run, True)
    ratio = storm_p99_ratio(run)
    rows = [
        "| goal | measured | result |",
        "| --- | --- | --- |",
        f"| well-behaved polls' p99 with the storm ≤ {P99_RATIO_GOAL:g}× without | {ratio:.2f}× "
        f"| {verdict(ratio <= P99_RATIO_GOAL)} |",
        "",
        f"| blocks of {run.block_s:g} s, alternating ({len(run.of(False))} of each) "
        "| without the storm | with the storm |",
        "| --- | ---: | ---: |",
    ]
    rows += [f"| {name} | {quiet[name]} | {storm[name]} |" for name in quiet]
    return rows


# ====================================================================== figure 2
@dataclass(slots=True)
class Step:
    """Figure 2, one offered rate (fleet polls per second)."""

    rate: float
    polls_per_newcomer: int
    seconds: float
    found: Period
    database: Database

    def achieved(self, kind: str) -> float:
        """Answers per second, less those that said storage unavailable."""
        return (self.found.calls[kind] - self.found.storage_errors[kind]) / self.seconds

    def offered(self, kind: str) -> float:
        return self.rate if kind == "poll" else self.rate / self.polls_per_newcomer

    def keeps_up(self) -> bool:
        """The offer answered (storage errors are not answers)."""
        return all(
            self.achieved(kind) >= ACHIEVED_SHARE * self.offered(kind)
            for kind in ("poll", "newcomer")
        )

    def holds(self) -> bool:
        """Kept up, every answer right, and every answer's p99 under the goal."""
        return (
            self.keeps_up()
            and not sum(self.found.unexpected.values())
            and all(
                ms(self.found.seconds.get(kind, []), 0.99) < ANSWER_P99_GOAL_MS
                for kind in ("poll", "newcomer")
            )
        )


@dataclass(slots=True)
class CapacityRun:
    """Figure 2: the filled queue, how long it took, and the steps."""

    waiting: int
    fill_s: float
    fold_s: float
    analyze_s: float
    steps: list[Step] = field(default_factory=list)

    def figure(self) -> float | None:
        held = [step.rate for step in self.steps if step.holds()]
        return max(held) if held else None

    def throughput(self) -> float | None:
        kept = [step.rate for step in self.steps if step.keeps_up()]
        return max(kept) if kept else None


def capacity_rows(run: CapacityRun) -> list[str]:
    def shown(rate: float | None) -> str:
        if rate is None:
            return "none"
        return f"{rate:,.0f} polls/s + {rate / run.steps[0].polls_per_newcomer:,.0f} newcomers/s"

    rows = [
        f"- Filled {run.waiting:,} waiting with `COPY` in {run.fill_s:.0f} s, folded by the "
        f"leader in {run.fold_s:.0f} s; one `ANALYZE download_session` on it took "
        f"{run.analyze_s:.2f} s",
        f"- **Capacity: {shown(run.figure())}**: the highest step whose every answer has "
        f"p99 < {ANSWER_P99_GOAL_MS:g} ms and which answered ≥ {100 * ACHIEVED_SHARE:g} % of "
        f"its offer; answered in full, whatever the latency: {shown(run.throughput())}",
        "",
        "| offered polls/s (newcomers/s) | achieved | poll p50 / p99 | newcomer p50 / p99 "
        "| start lag p99 | statements per answer | PostgreSQL CPU, ours / server "
        "| servers' CPU | load | holds |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for step in run.steps:
        found, db = step.found, step.database
        answers = found.calls["poll"] + found.calls["newcomer"]
        errors = sum(found.storage_errors.values())
        wrong = sum(found.unexpected.values())
        rows.append(
            f"| {step.rate:,.0f} ({step.offered('newcomer'):,.0f}) "
            f"| {step.achieved('poll'):,.0f} ({step.achieved('newcomer'):,.0f}) "
            f"| {ms(found.seconds.get('poll', []), 0.5):.2f} / "
            f"{ms(found.seconds.get('poll', []), 0.99):.2f} ms "
            f"| {ms(found.seconds.get('newcomer', []), 0.5):.2f} / "
            f"{ms(found.seconds.get('newcomer', []), 0.99):.2f} ms "
            f"| {ms(found.lags, 0.99):.2f} ms "
            f"| {sum(found.statements.values()) / max(1, answers):.2f} "
            f"| {db.ours / step.seconds:.2f} / {db.server / step.seconds:.2f} "
            f"| {found.cpu / step.seconds:.2f} | {db.load:.2f} "
            f"| {'yes' if step.holds() else 'no'}"
            f"{f', {errors:,} storage errors' if errors else ''}"
            f"{f', {wrong:,} wrong' if wrong else ''} |"
        )
    return rows


def problems(storm: StormRun | None, capacity: CapacityRun | None) -> list[str]:
    """What makes the figures wrong rather than slow."""
    found: list[str] = []
    if storm is not None:
        every = merge(storm.blocks)
        if sum(every.unexpected.values()):
            found.append(f"figure 1: answers of the wrong kind: {dict(every.unexpected)}")
        if errors := sum(every.storage_errors.values()):
            found.append(f"figure 1: {errors} answers said storage unavailable")
    if capacity is not None:
        for step in capacity.steps:  # storage errors of an overloaded step are its result
            if sum(step.found.unexpected.values()):
                wrong = dict(step.found.unexpected)
                found.append(f"figure 2 at {step.rate:,.0f}/s: answers of the wrong kind: {wrong}")
    return found
