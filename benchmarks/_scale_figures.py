"""What ``pg_scale`` measures, as plain data: sent from the server processes to the
parent (so everything here pickles) and turned into tables by ``_scale_report``.

All times are seconds (``time.perf_counter`` around one call) unless a name says ms.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from benchmarks._machine import median
from benchmarks.core_bench import quantile

__all__ = [
    "ChurnFigures",
    "ClientFigures",
    "PollFigures",
    "PostgresExtras",
    "SizeRun",
    "StoreRun",
    "TickSample",
    "p50",
    "p99",
    "ratio",
]


def p50(values: Sequence[float]) -> float:
    return median(values)


def p99(values: Sequence[float]) -> float:
    """Nearest-rank p99 (of 100 values the 99th; of fewer than 100, the largest)."""
    return quantile(values, 0.99)


def ratio(numerator: float, denominator: float) -> float:
    """``numerator / denominator``; NaN when either was not measured or is zero."""
    if math.isnan(numerator) or math.isnan(denominator) or denominator <= 0:
        return math.nan
    return numerator / denominator


@dataclass(slots=True)
class PollFigures:
    """Polls of the waiter at one position (``expected``: 1-based, by service order)."""

    label: str
    expected: int
    seconds: list[float] = field(default_factory=list)
    positions: list[int | None] = field(default_factory=list)  # as answered
    statements: int = 0  # database statements, all measured polls together
    unexpected: int = 0  # answers other than Queued

    @property
    def answered(self) -> str:
        seen = sorted({p for p in self.positions if p is not None})
        if not seen:
            return "–"
        return f"{seen[0]:,}" if len(seen) == 1 else f"{seen[0]:,}–{seen[-1]:,}"


@dataclass(slots=True)
class TickSample:
    started: float  # time.monotonic() when the tick began (system-wide clock)
    seconds: float
    led: bool
    marked: int = 0
    expired: int = 0
    statements: dict[str, float] = field(default_factory=dict)  # name -> ms (PostgreSQL)
    lost: bool = False  # led when it began, not when it ended: the tick failed


@dataclass(slots=True)
class ChurnFigures:
    """Steady churn: slots free and are claimed, polls and newcomers arrive, newcomers
    that never come back expire. Counts are of the measured steps only."""

    steps: int = 0
    late_steps: int = 0  # steps whose client work outlasted the step (PostgreSQL)
    window: tuple[float, float] = (math.nan, math.nan)  # monotonic, measured steps
    claims: int = 0
    completions: int = 0
    yielded: int = 0
    newcomers: int = 0
    polls: dict[str, list[float]] = field(default_factory=dict)  # kind -> seconds
    unexpected: int = 0

    def poll_count(self) -> int:
        return sum(len(values) for values in self.polls.values())


@dataclass(slots=True)
class ClientFigures:
    """Everything the clients measured against one store at one size."""

    polls: dict[str, PollFigures] = field(default_factory=dict)
    newcomer_seconds: list[float] = field(default_factory=list)
    newcomer_statements: int = 0
    newcomer_unexpected: int = 0
    range_seconds: list[float] = field(default_factory=list)
    range_statements: int = 0
    range_unexpected: int = 0
    churn: ChurnFigures = field(default_factory=ChurnFigures)


@dataclass(slots=True)
class StoreRun:
    """One store at one size: the clients' figures and the leader's ticks (of the
    churn's measured steps)."""

    store: str
    clients: ClientFigures
    ticks: list[TickSample]
    fill_seconds: float = 0.0

    @property
    def tick_ms(self) -> list[float]:
        return [1000 * sample.seconds for sample in self.ticks]


@dataclass(slots=True)
class PostgresExtras:
    """What only the PostgreSQL store has: its fill, size, plans and processes."""

    copy_seconds: float = 0.0
    vacuum_seconds: float = 0.0
    check_seconds: float = 0.0
    database_bytes: int = 0
    relations: list[tuple[str, int]] = field(default_factory=list)  # largest first
    explain: dict[str, tuple[float, int, int]] = field(default_factory=dict)  # ms, hit, read
    rss: dict[str, tuple[int, int]] = field(default_factory=dict)  # process -> (RSS, peak)
    leaders: list[str] = field(default_factory=list)  # processes that led a measured tick
    lost_leads: int = 0  # ticks, all through the size's run, that failed and lost the lead


@dataclass(slots=True)
class SizeRun:
    """Both stores at one size (``waiting`` 0 is the empty queue of the run)."""

    size: int
    waiting: int
    memory: StoreRun | None = None
    postgres: StoreRun | None = None
    extras: PostgresExtras = field(default_factory=PostgresExtras)
    seconds: float = 0.0
