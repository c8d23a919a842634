"""How true the announced start times were: one score per wait (R-EST-4).

A waiting client is told a start time and an interval around it. When the session gets
its slot, the wait is scored against what that wait announced — not against an earlier
wait of the same download (a resumed or yielded session waits again and is told anew).
Both stores keep an :class:`EstimateScorer`; the interval is the policy's
(:func:`~arkvory_sched.policy.estimate_interval`), the one both stores announce.
"""

from __future__ import annotations

from .._model import EstimateAccuracy
from ..policy import estimate_interval
from ._histogram import Histogram

__all__ = ["RELATIVE_ERROR_BUCKETS", "SIGNED_ERROR_BUCKETS", "EstimateScorer"]

# actual − announced start, seconds: negative buckets are starts earlier than announced.
SIGNED_ERROR_BUCKETS: tuple[float, ...] = (
    -3600, -600, -120, -30, -10, -2, 0, 2, 10, 30, 120, 600, 3600,
)  # fmt: skip
# |actual − announced| over the announced wait (at least one second).
RELATIVE_ERROR_BUCKETS: tuple[float, ...] = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0)


class EstimateScorer:
    """Scores of the waits that ended in a slot: absolute, signed and relative error."""

    __slots__ = ("_absolute", "_inside", "_relative", "_signed")

    def __init__(self) -> None:
        self._absolute = Histogram()
        self._signed = Histogram(SIGNED_ERROR_BUCKETS)
        self._relative = Histogram(RELATIVE_ERROR_BUCKETS)
        self._inside = 0

    def score(self, estimated_at: float, announced: float, started: float) -> None:
        """One wait: announced at ``estimated_at`` to start at ``announced``; it started
        at ``started`` (all on one clock)."""
        error = started - announced
        self._absolute.observe(abs(error))
        self._signed.observe(error)
        self._relative.observe(abs(error) / max(1.0, announced - estimated_at))
        earliest, latest = estimate_interval(announced, estimated_at)
        if earliest <= started <= latest:
            self._inside += 1

    def absolute(self) -> Histogram:
        """The absolute error in seconds (the ``estimate_error_seconds`` histogram)."""
        return self._absolute

    def accuracy(self) -> EstimateAccuracy:
        return EstimateAccuracy(
            signed_error_seconds=self._signed.snapshot(),
            relative_error=self._relative.snapshot(),
            inside_interval=self._inside,
        )
