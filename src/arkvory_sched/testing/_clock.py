"""Test support shipped with the library: a controllable clock.

Import it in your own tests to drive a scheduler through hours of queue time in
milliseconds. The monotonic side refuses to go backwards, like the real one; the wall
side may be jumped either way to test clock changes (R-RES-5).
"""

from __future__ import annotations

__all__ = ["FakeClock"]


class FakeClock:
    """A :class:`~arkvory_sched.Clock` whose time moves only when told to."""

    __slots__ = ("_monotonic", "_wall")

    def __init__(self, *, monotonic: float = 1_000.0, wall: float = 1_780_000_000.0) -> None:
        self._monotonic = monotonic
        self._wall = wall

    def monotonic(self) -> float:
        return self._monotonic

    def wall(self) -> float:
        return self._wall

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` pass on both clocks."""
        if seconds < 0:
            raise ValueError("time does not go backwards; use jump_wall() for clock changes")
        self._monotonic += seconds
        self._wall += seconds

    def set_monotonic(self, value: float) -> None:
        """Move to an absolute monotonic time (not backwards), advancing wall time with it."""
        self.advance(value - self._monotonic)

    def jump_wall(self, seconds: float) -> None:
        """Change only the wall clock (NTP step, manual change, VM restore)."""
        self._wall += seconds

    def __repr__(self) -> str:
        return f"FakeClock(monotonic={self._monotonic!r}, wall={self._wall!r})"
