"""What the in-memory store counts for ``stats()``: one record, one home for each count.

:class:`Counters` is handed to every part that counts something — admission counts
grants, the session table completions and waits, the tick no-shows, idle releases and
preemptions, the answers refusals, delivery the bytes — and :class:`Statistics` reads
them all in one place.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .._model import RejectReason
from ..measures import EstimateScorer, Histogram
from ..policy import CLASS_COUNT

__all__ = ["Counters"]


@dataclass(slots=True)
class Counters:
    """The store's running totals; lists are indexed by class rank and never replaced
    (the per-request component adds its bytes to ``bytes_by_class`` directly)."""

    admitted: int = 0
    completed: int = 0
    no_shows: int = 0
    idle_releases: int = 0
    preemptions: int = 0
    rejections: dict[RejectReason, int] = field(default_factory=dict)
    bytes_by_class: list[int] = field(default_factory=lambda: [0] * CLASS_COUNT)
    wait_histograms: list[Histogram] = field(
        default_factory=lambda: [Histogram() for _ in range(CLASS_COUNT)]
    )
    estimates: EstimateScorer = field(default_factory=EstimateScorer)
    last_tick_seconds: float = 0.0
