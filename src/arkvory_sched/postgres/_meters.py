"""What one ``PostgresScheduler`` process measures and counts of its own.

The fleet's figures are rows of the shared tables; these are this process's: the
bytes it delivered (its delivery-rate meter and the per-class totals, shared with its
per-request places), the waits of the starts it granted, how its estimates fared, the
admissions and refusals it answered, and how long its last tick took. Statistics read
them; the parts that answer requests feed them.
"""

from __future__ import annotations

from .._classes import DownloadClass
from .._clock import Clock
from .._model import Rejected, RejectReason
from .._rate import PeakRateMeter
from ..measures import EstimateScorer, Histogram
from ..policy import CLASS_COUNT

__all__ = ["Meters"]


class Meters:
    """This process's meters and counters (see the module docstring)."""

    __slots__ = (
        "_clock",
        "_last_rate",
        "admitted",
        "bytes_by_class",
        "estimates",
        "last_tick_seconds",
        "rate",
        "rejections",
        "wait_histograms",
    )

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self.rate = PeakRateMeter()
        self._last_rate = 0.0
        self.bytes_by_class = [0] * CLASS_COUNT
        self.wait_histograms = [Histogram() for _ in range(CLASS_COUNT)]
        self.estimates = EstimateScorer()
        self.admitted = 0
        self.rejections: dict[RejectReason, int] = {}
        self.last_tick_seconds = 0.0

    def local_rate(self) -> float:
        """This process's peak delivery rate now, or the last one it measured."""
        peak = self.rate.peak(self._clock.monotonic())
        if peak > 0:
            self._last_rate = peak
        return peak or self._last_rate

    def reject(self, reason: RejectReason, retry_after: int, cls: DownloadClass | None) -> Rejected:
        """A refusal, counted."""
        self.rejections[reason] = self.rejections.get(reason, 0) + 1
        return Rejected(reason, retry_after, cls)
