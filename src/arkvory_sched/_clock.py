"""Clocks: the scheduler never reads time itself, it is handed a :class:`Clock`.

The queue runs on the monotonic clock so that a wall-clock jump neither resets the
queue nor holds slots (R-RES-5); tickets and ``Arkvory-Starts-At`` are wall time, so
the clock exposes both and the scheduler converts between them.
"""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "SystemClock"]


@runtime_checkable
class Clock(Protocol):
    """A source of monotonic and wall time, in seconds."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards (arbitrary origin)."""
        ...

    def wall(self) -> float:
        """Seconds since the Unix epoch; may jump in either direction."""
        ...


class SystemClock:
    """The process clocks: ``time.monotonic`` and ``time.time``."""

    __slots__ = ()

    def monotonic(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()

    def __repr__(self) -> str:
        return "SystemClock()"
