"""A fixed-bucket cumulative histogram kept by the core and read at scrape time.

Metrics are collected from aggregate stats when Prometheus scrapes (R-VIS-3), so the
core counts observations itself instead of touching a metrics library per request.
"""

from __future__ import annotations

import bisect

from .._model import HistogramSnapshot

__all__ = ["WAIT_BUCKETS", "Histogram"]

WAIT_BUCKETS: tuple[float, ...] = (
    1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 43200, 86400,
)  # fmt: skip


class Histogram:
    __slots__ = ("_bounds", "_buckets", "_count", "_total")

    def __init__(self, bounds: tuple[float, ...] = WAIT_BUCKETS) -> None:
        self._bounds = bounds
        self._buckets = [0] * len(bounds)
        self._count = 0
        self._total = 0.0

    def observe(self, value: float) -> None:
        index = bisect.bisect_left(self._bounds, value)
        if index < len(self._buckets):
            self._buckets[index] += 1
        self._count += 1
        self._total += value

    def snapshot(self) -> HistogramSnapshot:
        cumulative: list[int] = []
        running = 0
        for bucket in self._buckets:
            running += bucket
            cumulative.append(running)
        return HistogramSnapshot(self._bounds, tuple(cumulative), self._count, self._total)
