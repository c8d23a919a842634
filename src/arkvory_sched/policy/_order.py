"""Service order: who is served next, between classes and within one (ADR 0002).

Between classes a *stride* scheduler gives class ``c`` a share proportional to its
weight: each class carries a pass, the class with the smallest pass goes next (the more
urgent one on a tie) and its pass grows by ``1 / weight``. Within a class the store
keeps its waiters sorted by an order key: a round-robin tag under ``ordered``, the key
of :func:`smallest_first_key` under ``smallest-first``.

Everything here works on plain values: sequences of per-class heads, lists of passes.
The in-memory store hands in its sorted lists, the PostgreSQL leader the first rows of
each class.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import TypeVar

from ._constants import AGING_CAP_RANK, CLASS_COUNT, SIZE_DOUBLINGS_FOR_FULL_DELAY, SIZE_UNIT

__all__ = [
    "caught_up",
    "promote_at",
    "service_order",
    "smallest_first_key",
    "stride_ahead",
    "strides_of",
]

T = TypeVar("T")


def strides_of(weights: Sequence[int]) -> list[float]:
    """The pass step of each class: ``1 / weight``."""
    return [1.0 / weight for weight in weights]


def service_order(
    heads: Sequence[Sequence[T]],
    passes: Sequence[float],
    strides: Sequence[float],
    allowed: list[bool] | None = None,
) -> Iterator[tuple[int, T]]:
    """``(rank, waiter)`` in service order over per-class head sequences.

    ``passes`` is not changed (a copy advances); ``allowed[rank]`` may be switched off
    by the caller between two steps, which skips that class from then on.
    """
    positions = [0] * len(heads)
    passes = list(passes)
    while True:
        best = -1
        for rank in range(len(heads)):
            if positions[rank] >= len(heads[rank]):
                continue
            if allowed is not None and not allowed[rank]:
                continue
            if best < 0 or passes[rank] < passes[best]:
                best = rank
        if best < 0:
            return
        item = heads[best][positions[best]]
        positions[best] += 1
        passes[best] += strides[best]
        yield best, item


def stride_ahead(
    own: int,
    rank: int,
    passes: Sequence[float],
    lengths: Sequence[int],
    strides: Sequence[float],
) -> int:
    """How many waiters the stride serves before the one with ``own`` ahead in its class.

    An O(classes) estimate: each other class gets the turns its pass allows before this
    waiter's pass is reached, never more than it has waiters.
    """
    my_pass = passes[rank] + own * strides[rank]
    ahead = own
    for other in range(CLASS_COUNT):
        if other == rank:
            continue
        length = lengths[other]
        if not length:
            continue
        gap = my_pass - passes[other]
        if gap > 0:
            turns = math.ceil(gap / strides[other])
        else:
            turns = 1 if gap == 0 and other < rank else 0
        ahead += min(length, max(0, turns))
    return int(ahead)


def caught_up(
    passes: Sequence[float], idle_classes: Sequence[int], global_pass: float
) -> list[float]:
    """Idle classes' passes raised to ``global_pass``, the pass of the last grant.

    A class that was empty must not bank credit for the time it was idle. The in-memory
    store applies this when a class turns busy; the PostgreSQL leader applies it to the
    classes that are empty at its tick (ADR 0016).
    """
    idle = set(idle_classes)
    return [max(value, global_pass) if rank in idle else value for rank, value in enumerate(passes)]


def smallest_first_key(size: int, arrival: float, aging_seconds: float) -> float:
    """The order key within a class under ``smallest-first``.

    Without aging, the size. With aging, the arrival plus a size delay of at most
    ``aging_seconds``: a large object yields only to smaller ones that arrived within
    the aging time after it, so it cannot wait forever. The key does not depend on the
    class, so an aged waiter keeps it when it moves up.
    """
    if aging_seconds <= 0:
        return float(size)
    doublings = math.log2(max(size, SIZE_UNIT) / SIZE_UNIT)
    return arrival + aging_seconds * min(1.0, doublings / SIZE_DOUBLINGS_FOR_FULL_DELAY)


def promote_at(
    aging_since: float, base_rank: int, queue_rank: int, aging_seconds: float
) -> float | None:
    """When a waiter in ``queue_rank`` moves one class up; None if it never does.

    Aging lifts a waiter one class per ``aging_seconds`` of waiting, never above
    ``release`` (rank 1), and not at all when aging is off (0). Under every strategy.
    """
    if aging_seconds <= 0 or queue_rank <= AGING_CAP_RANK:
        return None
    climbed = base_rank - queue_rank
    return aging_since + aging_seconds * (climbed + 1)
