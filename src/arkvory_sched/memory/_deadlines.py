"""One-second deadline buckets for no-shows and paused-session expiry (R-RES-2).

Every waiting client moves its own no-show deadline forward each time it polls. With a
heap, each of those moves leaves a stale entry that a later tick must pop and re-file:
at a million waiters that is thousands of heap operations per tick for nothing. Here a
poll moves its session from one bucket to another in O(1), and a tick reads only the
buckets that came due — which hold just the real expirations.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from ._session import Session

__all__ = ["DeadlineBuckets"]


class DeadlineBuckets:
    """Sessions filed under the whole second their deadline falls in.

    A bucket comes due at the start of its second, up to a second early; the caller
    re-files a session whose own deadline has not passed yet (at most once).
    """

    __slots__ = ("_buckets", "_cursor")

    def __init__(self, now: float) -> None:
        self._buckets: dict[int, dict[Session, None]] = {}
        self._cursor = math.floor(now)

    def schedule(self, session: Session, when: float) -> None:
        """File ``session`` to come due at ``when`` (moving it if it was filed already)."""
        second = max(math.floor(when), self._cursor)
        current = session.expiry_bucket
        if current == second:
            return
        if current is not None:
            self._drop(session, current)
        self._buckets.setdefault(second, {})[session] = None
        session.expiry_bucket = second

    def cancel(self, session: Session) -> None:
        current = session.expiry_bucket
        if current is not None:
            self._drop(session, current)
            session.expiry_bucket = None

    def due(self, now: float) -> Iterator[Session]:
        """Sessions whose bucket came due by ``now``, each once, oldest bucket first."""
        limit = math.floor(now)
        if limit < self._cursor:
            return
        if limit - self._cursor > len(self._buckets):
            seconds = sorted(second for second in self._buckets if second <= limit)
        else:
            seconds = list(range(self._cursor, limit + 1))
        self._cursor = limit + 1
        for second in seconds:
            bucket = self._buckets.pop(second, None)
            if not bucket:
                continue
            for session in bucket:
                session.expiry_bucket = None
                yield session

    def _drop(self, session: Session, second: int) -> None:
        bucket = self._buckets.get(second)
        if bucket is not None:
            bucket.pop(session, None)
            if not bucket:
                del self._buckets[second]
