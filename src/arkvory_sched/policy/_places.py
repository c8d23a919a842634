"""How far a poll counts its place exactly, and the buckets beyond (ADR 0020).

A rule of places, shared by every store: the PostgreSQL store counts a waiter's place
exactly among the first waiters of its class and by buckets behind them.
"""

from __future__ import annotations

from typing import Final

__all__ = ["PLACE_BUCKET", "exact_head"]

#: The place buckets' size (ADR 0020): a poll counts at most about twice this many
#: waiters of its own bucket; the leader's fold touches one row per bucket.
PLACE_BUCKET: Final = 1024


def exact_head(sessions: int) -> int:
    """Below this many waiters ahead of its bucket, a poll counts its place exactly.

    Twice the waiters the next ticks can serve (twice ``2 × sessions``), and never less
    than a bucket: the first ``2 × sessions`` of a class see their exact place unless
    more than that many waiters ahead of them left within one tick.
    """
    return max(4 * sessions, PLACE_BUCKET)
