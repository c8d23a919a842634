"""What ``pg_scale`` measures, as plain data: sent from the server processes to the
parent (so everything here pickles) and turned into tables by ``_scale_report``.

All times are seconds (``time.perf_counter`` around one call).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from benchmarks._core_run import quantile
from benchmarks._machine import median

__all__ = ["ChurnFigures", "ClientFigures", "PollFigures", "SizeRun", "StoreRun", "TickSample"]


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
    unexpected: int = 0  # answers other than Queued


@dataclass(slots=True)
class TickSample:
    started: float  # time.monotonic() when the tick began (system-wide clock)
    seconds: float
    led: bool
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


@dataclass(slots=True)
class ClientFigures:
    """Everything the clients measured against one store at one size."""

    polls: dict[str, PollFigures] = field(default_factory=dict)
    newcomer_seconds: list[float] = field(default_factory=list)
    newcomer_unexpected: int = 0
    range_seconds: list[float] = field(default_factory=list)
    range_unexpected: int = 0
    churn: ChurnFigures = field(default_factory=ChurnFigures)


@dataclass(slots=True)
class StoreRun:
    """One store at one size: the clients' figures and the leader's ticks (of the
    churn's measured steps)."""

    store: str
    clients: ClientFigures
    ticks: list[TickSample]

    @property
    def tick_ms(self) -> list[float]:
        return [1000 * sample.seconds for sample in self.ticks]


@dataclass(slots=True)
class SizeRun:
    """Both stores at one size, and how the PostgreSQL run went."""

    waiting: int
    memory: StoreRun | None = None
    postgres: StoreRun | None = None
    lost_leads: int = 0  # PostgreSQL ticks, all through the size's run, that lost the lead
    seconds: float = 0.0
