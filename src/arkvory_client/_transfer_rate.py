"""The transfer rate shown with progress: bytes per second over the last ten seconds.

A rate over the whole download would lag behind a connection that speeds up or slows
down, and one over a single chunk would jitter; a short sliding window follows the
connection without flicker. Waiting clears it, so time spent queued never lowers it.
"""

from __future__ import annotations

from collections import deque
from typing import Final

__all__ = ["RATE_WINDOW", "TransferRate"]

RATE_WINDOW: Final = 10.0
"""Seconds of transfer the rate is measured over."""


class TransferRate:
    """Samples of (monotonic time, bytes done) within :data:`RATE_WINDOW`."""

    def __init__(self) -> None:
        self._samples: deque[tuple[float, int]] = deque()

    def clear(self) -> None:
        """The transfer paused (a wait): the next rate starts from the next sample."""
        self._samples.clear()

    def start(self, now_mono: float, done: int) -> None:
        """A response body begins with ``done`` bytes saved."""
        self._samples.append((now_mono, done))

    def measure(self, now_mono: float, done: int) -> float:
        """Bytes per second up to ``done`` bytes at ``now_mono`` (``0`` without time)."""
        samples = self._samples
        samples.append((now_mono, done))
        while len(samples) > 2 and now_mono - samples[1][0] >= RATE_WINDOW:
            samples.popleft()
        oldest_time, oldest_done = samples[0]
        elapsed = now_mono - oldest_time
        rate = (done - oldest_done) / elapsed if elapsed > 0 else 0.0
        return max(rate, 0.0)
