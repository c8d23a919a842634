"""How true the announced start times were: one score per wait (R-EST-4).

A waiting client is told a start time and an interval around it. When the session gets
its slot, the wait is scored against what that wait announced — not against an earlier
wait of the same download (a resumed or yielded session waits again and is told anew).
Both stores keep an :class:`EstimateScorer`; the interval is the policy's
(:func:`~arkvory_sched.policy.estimate_interval`), the one both stores announce.

Each wait is scored twice: into the totals and into the scores of its kind of client
(:class:`~arkvory_sched.ClientKind`, issue #28). A protocol client follows ``checkAt``
while curl or a browser retries on ``Retry-After`` alone, and a plain GET holding a slot
moves the estimates differently from ranges; totals alone would let a crowd of the one
hide how the other is misled.
"""

from __future__ import annotations

from .._model import ClientKind, EstimateAccuracy
from ..policy import estimate_interval
from ._histogram import Histogram

__all__ = ["RELATIVE_ERROR_BUCKETS", "SIGNED_ERROR_BUCKETS", "EstimateScorer"]

# actual − announced start, seconds: negative buckets are starts earlier than announced.
SIGNED_ERROR_BUCKETS: tuple[float, ...] = (
    -3600, -600, -120, -30, -10, -2, 0, 2, 10, 30, 120, 600, 3600,
)  # fmt: skip
# |actual − announced| over the announced wait (at least one second).
RELATIVE_ERROR_BUCKETS: tuple[float, ...] = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0)


class _Scores:
    """The scores of one set of waits: absolute, signed and relative error, inside."""

    __slots__ = ("absolute", "inside", "relative", "signed")

    def __init__(self) -> None:
        self.absolute = Histogram()
        self.signed = Histogram(SIGNED_ERROR_BUCKETS)
        self.relative = Histogram(RELATIVE_ERROR_BUCKETS)
        self.inside = 0

    def add(self, error: float, relative: float, inside: bool) -> None:
        self.absolute.observe(abs(error))
        self.signed.observe(error)
        self.relative.observe(relative)
        self.inside += inside

    def accuracy(self) -> EstimateAccuracy:
        return EstimateAccuracy(
            signed_error_seconds=self.signed.snapshot(),
            relative_error=self.relative.snapshot(),
            inside_interval=self.inside,
            absolute_error_seconds=self.absolute.snapshot(),
        )


class EstimateScorer:
    """Scores of the waits that ended in a slot, in total and per kind of client."""

    __slots__ = ("_by_client", "_total")

    def __init__(self) -> None:
        self._total = _Scores()
        self._by_client = {kind: _Scores() for kind in ClientKind}

    def score(self, estimated_at: float, announced: float, started: float, *, has_id: bool) -> None:
        """One wait: announced at ``estimated_at`` to start at ``announced``; it started
        at ``started`` (all on one clock). ``has_id``: the client sent a download id."""
        error = started - announced
        relative = abs(error) / max(1.0, announced - estimated_at)
        earliest, latest = estimate_interval(announced, estimated_at)
        inside = earliest <= started <= latest
        self._total.add(error, relative, inside)
        self._by_client[ClientKind.of(has_id)].add(error, relative, inside)

    def absolute(self) -> Histogram:
        """The absolute error in seconds (the ``estimate_error_seconds`` histogram)."""
        return self._total.absolute

    def accuracy(self) -> EstimateAccuracy:
        """The scores of every wait."""
        return self._total.accuracy()

    def accuracy_by_client(self) -> dict[ClientKind, EstimateAccuracy]:
        """The scores of each kind of client's waits, every kind present."""
        return {kind: scores.accuracy() for kind, scores in self._by_client.items()}
