"""Clocks and sleeping: the client never reads time or sleeps by itself.

A :class:`Clock`, a sleep function and an RNG are handed in, so tests drive hours of
queueing in milliseconds, and so that the one tricky rule of long waits lives in one
place (R-CLIENT-5): a wait is slept in steps of at most :data:`MAX_SLEEP_STEP` seconds,
and before each step the **wall** clock is read again. A laptop that sleeps through the
start time, a paused VM or a clock set forward ends the wait at the next step instead of
hours later. A clock set *backwards* must not stretch the wait either, so the wait also
ends once its full length has passed on the monotonic clock.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Final, Protocol, runtime_checkable

from ._exceptions import DownloadCancelledError

__all__ = [
    "CANCEL_CHECK_STEP",
    "MAX_SLEEP_STEP",
    "AsyncSleeper",
    "CancelCheck",
    "Clock",
    "Sleeper",
    "SystemClock",
    "sleep_until_wall",
    "sleep_until_wall_sync",
]

MAX_SLEEP_STEP: Final = 60.0
"""The longest single sleep, in seconds: the wall clock is re-read at least this often."""

CANCEL_CHECK_STEP: Final = 0.5
"""The longest single sleep when the caller can cancel: a wait of minutes in 60 s steps
would answer a cancel only a minute later (a program stopping its downloads waited up
to that long for each one)."""

CancelCheck = Callable[[], bool]
"""Returns true when the caller wants the download stopped."""


class Sleeper(Protocol):
    """A blocking sleep taking seconds, such as ``time.sleep``."""

    def __call__(self, seconds: float, /) -> object: ...


class AsyncSleeper(Protocol):
    """An awaitable sleep taking seconds, such as ``anyio.sleep``."""

    def __call__(self, seconds: float, /) -> Awaitable[object]: ...


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


class _Wait:
    """The arithmetic shared by the sync and async sleeps: how long the next step is."""

    __slots__ = ("_clock", "_end_monotonic", "_target_wall")

    def __init__(self, target_wall: float, clock: Clock) -> None:
        self._clock = clock
        self._target_wall = target_wall
        self._end_monotonic = clock.monotonic() + max(0.0, target_wall - clock.wall())

    def next_step(self, cancelled: CancelCheck | None) -> float:
        """Seconds to sleep now, or ``0`` when the wait is over."""
        if cancelled is not None and cancelled():
            raise DownloadCancelledError("cancelled by the caller while waiting")
        by_wall = self._target_wall - self._clock.wall()
        by_monotonic = self._end_monotonic - self._clock.monotonic()
        remaining = min(by_wall, by_monotonic)
        longest = MAX_SLEEP_STEP if cancelled is None else CANCEL_CHECK_STEP
        return 0.0 if remaining <= 0 else min(remaining, longest)


def sleep_until_wall_sync(
    target_wall: float,
    clock: Clock,
    sleep: Sleeper,
    *,
    cancelled: CancelCheck | None = None,
) -> None:
    """Block until the wall clock reaches ``target_wall`` (Unix seconds).

    Sleeps in steps of at most :data:`MAX_SLEEP_STEP`, re-reading the wall clock before
    each; also returns once the wait's original length has passed on the monotonic
    clock, so setting the clock back does not prolong it. Calls ``cancelled`` before
    every step and raises :class:`DownloadCancelledError` when it returns true.
    """
    wait = _Wait(target_wall, clock)
    while (step := wait.next_step(cancelled)) > 0:
        sleep(step)


async def sleep_until_wall(
    target_wall: float,
    clock: Clock,
    sleep: AsyncSleeper,
    *,
    cancelled: CancelCheck | None = None,
) -> None:
    """The async twin of :func:`sleep_until_wall_sync`; also ends on task cancellation."""
    wait = _Wait(target_wall, clock)
    while (step := wait.next_step(cancelled)) > 0:
        await sleep(step)
