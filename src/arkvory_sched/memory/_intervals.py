"""Byte ranges a download session has delivered in full (R-SESS-8).

A session is complete when what it delivered covers the download from its start to the
last byte, whatever order the client read it in (resumed transfers, tail reads first,
parallel ranges behind a NAT). Only whole responses are added, so an interrupted
response never makes a session look complete.

The list is bounded because a hostile or confused client can request millions of
scattered ranges; forgetting an interval can only make completion later (the session
then ends on idle), never earlier, so the bound is safe.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

__all__ = ["DEFAULT_MAX_INTERVALS", "DeliveredRanges"]

DEFAULT_MAX_INTERVALS = 64


class DeliveredRanges:
    """Merged, sorted, disjoint half-open byte intervals ``[start, end)`` delivered in full.

    At most ``max_intervals`` are kept: when an addition would exceed that, the shortest
    interval is forgotten (the lowest one among equally short), which only delays
    completion (R-SESS-8). Intervals that overlap or touch are merged, so two stored
    intervals always have a gap of at least one byte between them.
    """

    __slots__ = ("_ends", "_max", "_starts")

    def __init__(self, max_intervals: int = DEFAULT_MAX_INTERVALS) -> None:
        if max_intervals < 1:
            raise ValueError(f"max_intervals must be at least 1, got {max_intervals}")
        self._max = max_intervals
        # Two parallel sorted lists: with disjoint, non-touching intervals both the
        # starts and the ends are strictly increasing, so each can be bisected.
        self._starts: list[int] = []
        self._ends: list[int] = []

    @property
    def max_intervals(self) -> int:
        return self._max

    def add(self, start: int, end: int) -> None:
        """Record that ``[start, end)`` was delivered; an empty range changes nothing.

        Two bisections find the run of stored intervals the new one overlaps or
        touches, and that run is replaced by their union in one slice assignment:
        O(log n + k) comparisons, plus a memmove of the tail bounded by the cap.
        """
        if end <= start:
            return
        if start < 0:
            raise ValueError(f"byte offsets cannot be negative, got [{start}, {end})")
        starts, ends = self._starts, self._ends
        # First interval whose end reaches the new start (end == start touches).
        lo = bisect_left(ends, start)
        # One past the last interval whose start is within reach of the new end.
        hi = bisect_right(starts, end)
        if lo < hi:
            start = min(start, starts[lo])
            end = max(end, ends[hi - 1])
        starts[lo:hi] = [start]
        ends[lo:hi] = [end]
        if len(starts) > self._max:
            self._forget_shortest()

    def _forget_shortest(self) -> None:
        # Only reached when the list is full, so the scan is bounded by max_intervals.
        starts, ends = self._starts, self._ends
        victim = min(range(len(starts)), key=lambda i: ends[i] - starts[i])
        del starts[victim]
        del ends[victim]

    def covers(self, start: int, end: int) -> bool:
        """Whether ``[start, end)`` lies inside one stored interval; an empty range does."""
        if end <= start:
            return True
        i = bisect_right(self._starts, start) - 1
        return i >= 0 and self._ends[i] >= end

    def covered_bytes(self, start: int, end: int) -> int:
        """How many bytes of ``[start, end)`` were delivered (for progress and stats)."""
        if end <= start:
            return 0
        starts, ends = self._starts, self._ends
        total = 0
        i = bisect_right(ends, start)  # first interval ending after ``start``
        while i < len(starts) and starts[i] < end:
            total += min(end, ends[i]) - max(start, starts[i])
            i += 1
        return total

    def intervals(self) -> tuple[tuple[int, int], ...]:
        return tuple(zip(self._starts, self._ends, strict=True))

    def last(self) -> tuple[int, int] | None:
        """The highest stored interval, or ``None``: whether the tail was delivered is
        asked of every range of a session, so it costs no copy of the list."""
        if not self._starts:
            return None
        return self._starts[-1], self._ends[-1]

    def __len__(self) -> int:
        return len(self._starts)

    def __repr__(self) -> str:
        return f"DeliveredRanges({list(self.intervals())!r}, max_intervals={self._max})"
