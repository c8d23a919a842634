"""One token bucket for every response the demo server sends.

On loopback a file is copied at memory speed, so a mass update would be over before
any queue formed. Sharing one bucket between all responses turns the loopback into a
link of a chosen bandwidth (``--bandwidth 40MB``), which is what makes the scheduler's
behaviour — positions, start estimates, first clients finishing early — observable
in a demo and reproducible in a benchmark.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio

__all__ = ["BandwidthGovernor"]

# How far short of a chunk's tokens still counts as enough: the clock and the sleep
# are floats, so a wait of exactly the computed deficit may end a hair early.
_TOLERANCE = 1e-6


class BandwidthGovernor:
    """A token bucket refilled at ``bytes_per_second``, holding at most ``burst`` tokens.

    :meth:`acquire` lets callers through one at a time in arrival order (an
    :class:`anyio.Lock` is FIFO), so one large response cannot starve the others and no
    caller spins: a waiter sleeps exactly until its tokens have accrued. A request
    larger than the bucket is let through once the bucket is full and leaves it in
    debt, which the following callers pay off, so the long-run rate is exact whatever
    the chunk size. ``burst`` defaults to a tenth of a second of traffic (at least one
    byte), so a quiet link does not allow a long burst above the configured rate.

    ``clock`` and ``sleep`` are injectable so the accounting can be tested on virtual
    time; both default to the event loop's.
    """

    def __init__(
        self,
        bytes_per_second: int,
        *,
        burst: int | None = None,
        clock: Callable[[], float] = anyio.current_time,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    ) -> None:
        if bytes_per_second <= 0:
            raise ValueError(f"bytes_per_second must be positive, got {bytes_per_second}")
        if burst is None:
            burst = max(1, bytes_per_second // 10)
        if burst <= 0:
            raise ValueError(f"burst must be positive, got {burst}")
        self._rate = bytes_per_second
        self._burst = burst
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(burst)
        self._updated: float | None = None  # the clock needs a running event loop
        self._lock: anyio.Lock | None = None
        self._granted = 0

    @property
    def bytes_per_second(self) -> int:
        return self._rate

    @property
    def burst(self) -> int:
        return self._burst

    @property
    def granted(self) -> int:
        """Bytes let through so far (for tests and diagnostics)."""
        return self._granted

    @property
    def tokens(self) -> float:
        """Tokens in the bucket at the last update; negative while in debt."""
        return self._tokens

    async def acquire(self, n: int) -> None:
        """Wait until ``n`` bytes may be sent, then take them from the bucket.

        Cancellation while waiting takes nothing, and lets the next caller in.
        """
        if n < 0:
            raise ValueError(f"cannot acquire a negative number of bytes: {n}")
        if n == 0:
            return
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            needed = min(n, self._burst)
            self._refill()
            while self._tokens + _TOLERANCE < needed:
                await self._sleep((needed - self._tokens) / self._rate)
                self._refill()
            self._tokens -= n
            self._granted += n

    def _refill(self) -> None:
        now = self._clock()
        if self._updated is not None:
            elapsed = max(0.0, now - self._updated)
            self._tokens = min(float(self._burst), self._tokens + elapsed * self._rate)
        self._updated = now

    def __repr__(self) -> str:
        return f"BandwidthGovernor(bytes_per_second={self._rate}, burst={self._burst})"
