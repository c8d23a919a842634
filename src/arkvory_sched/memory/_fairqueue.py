"""The waiting index: who is served next, and how many are ahead of a given waiter.

Structure (ADR 0002)::

    class rank 0..3 ──► SortedList of (primary, secondary, seq, session)
                        ordered:        (round-robin tag, arrival)
                        smallest-first: (arrival + size delay, arrival)   or (size, arrival)
    rank 2..3       ──► SortedList of (promote_at, seq, session)    aging index

Between classes a *stride* scheduler gives class ``c`` a share proportional to its
weight: each class carries a pass value, the class with the smallest pass goes next and
its pass grows by ``1 / weight``. Within a class the round-robin tag gives a principal's
k-th waiter the turn ``k`` rounds after the current one, so principals alternate while
each principal's own waiters stay in arrival order.

Every operation is O(log n); nothing here walks the whole queue, so a tick and a poll
cost the same at 4,096 and at 1,048,576 waiters. The rules themselves (stride order,
waiters ahead, the smallest-first key, when a waiter ages) are the policy's
(:mod:`arkvory_sched.policy`, ADR 0016); this module keeps the live structures.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Iterator, Sequence

from sortedcontainers import SortedList

from ..policy import (
    AGING_CAP_RANK,
    CLASS_COUNT,
    ROUND_HISTORY_SECONDS,
    Strategy,
    promote_at,
    service_order,
    smallest_first_key,
    stride_ahead,
    strides_of,
)
from ._session import Session

__all__ = ["FairQueue"]

Entry = tuple[float, float, int, Session]
AgingEntry = tuple[float, int, Session]


class FairQueue:
    """Waiting sessions of all classes, in the order the current strategy serves them."""

    __slots__ = (
        "_ages",
        "_aging",
        "_aging_seconds",
        "_classes",
        "_global_pass",
        "_lengths",
        "_passes",
        "_strategy",
        "_strides",
        "_virtual_times",
        "_vt_history",
    )

    def __init__(self, strategy: Strategy, weights: Sequence[int], aging_seconds: float) -> None:
        self._strategy = strategy
        self._strides = strides_of(weights)
        self._aging_seconds = aging_seconds
        # Per base class: whether its waiters age (not a class with windows, ADR 0021).
        self._ages = [True] * CLASS_COUNT
        self._classes: list[SortedList] = [SortedList() for _ in range(CLASS_COUNT)]
        self._lengths = [0] * CLASS_COUNT  # len() of each class, kept for stride_ahead
        self._aging: list[SortedList] = [SortedList() for _ in range(CLASS_COUNT)]
        self._virtual_times = [0] * CLASS_COUNT
        # (time, virtual time) whenever a class's round moved on, kept for the ticket
        # window: a download returning with an old arrival re-enters the round it
        # arrived in, not the current one (R-TICKET-1, R-SESS-9).
        self._vt_history: list[deque[tuple[float, int]]] = [deque() for _ in range(CLASS_COUNT)]
        self._passes = [0.0] * CLASS_COUNT
        self._global_pass = 0.0

    # ------------------------------------------------------------------ size
    def __len__(self) -> int:
        return sum(self._lengths)

    def class_length(self, rank: int) -> int:
        return self._lengths[rank]

    def add(self, session: Session) -> None:
        """Insert a waiter in class ``session.queue_rank``."""
        rank = session.queue_rank
        entries = self._classes[rank]
        if not entries:
            # A class that was empty must not bank credit for the time it was idle.
            self._passes[rank] = max(self._passes[rank], self._global_pass)
        entry = self._entry_for(session, rank)
        session.entry = entry
        entries.add(entry)
        self._lengths[rank] += 1
        base = session.base_class.rank
        if self._aging_seconds > 0 and rank > AGING_CAP_RANK and self._ages[base]:
            at = promote_at(session.aging_since, base, rank, self._aging_seconds)
            self._aging[rank].add((at, session.seq, session))

    def remove(self, session: Session) -> None:
        """Take a waiter out (granted, no-show, cancelled or rekeyed)."""
        entry = session.entry
        if entry is None:
            return
        rank = session.queue_rank
        self._classes[rank].remove(entry)
        self._lengths[rank] -= 1
        session.entry = None
        if self._aging_seconds > 0 and rank > AGING_CAP_RANK:
            at = promote_at(session.aging_since, session.base_class.rank, rank, self._aging_seconds)
            self._aging[rank].discard((at, session.seq, session))

    def granted(self, session: Session, now: float) -> None:
        """Advance the round-robin and stride state for a waiter that got a slot."""
        rank = session.queue_rank
        entry = session.entry
        if entry is not None and self._strategy is Strategy.ORDERED:
            tag = int(entry[0])
            if tag > self._virtual_times[rank]:
                self._virtual_times[rank] = tag
                history = self._vt_history[rank]
                history.append((now, tag))
                while history and history[0][0] < now - ROUND_HISTORY_SECONDS:
                    history.popleft()
        self._global_pass = self._passes[rank]
        self._passes[rank] += self._strides[rank]
        self.remove(session)

    def _entry_for(self, session: Session, rank: int) -> Entry:
        if self._strategy is Strategy.SMALLEST_FIRST:
            key = smallest_first_key(session.object_size, session.arrival, self._aging_seconds)
            return (key, session.arrival, session.seq, session)
        tags = session.principal.last_tags
        history = self._vt_history[rank]
        if history and session.arrival < history[-1][0]:
            # An old arrival (ticket, pause, yield): the round current when it arrived.
            index = bisect.bisect_right(history, (session.arrival, math.inf))
            tag = (history[index - 1][1] if index else 0) + 1
            tags[rank] = max(tags[rank], tag)
        else:
            tag = max(self._virtual_times[rank], tags[rank]) + 1
            tags[rank] = tag
        return (float(tag), session.arrival, session.seq, session)

    # ---------------------------------------------------------------- aging
    def promote_aged(self, now: float) -> int:
        """Move waiters older than ``agingMinutes`` one class up, never above ``release``."""
        if self._aging_seconds <= 0:
            return 0
        moved = 0
        for rank in range(AGING_CAP_RANK + 1, CLASS_COUNT):
            aging = self._aging[rank]
            while aging and aging[0][0] <= now:
                session = aging[0][2]
                if not self._ages[session.base_class.rank]:
                    # Its class has had windows since it joined: deferred, it stays
                    # where it is and ages no more (ADR 0021), as on PostgreSQL.
                    aging.pop(0)
                    continue
                self.remove(session)
                session.queue_rank = rank - 1
                self.add(session)
                moved += 1
        return moved

    # ------------------------------------------------------------- ordering
    def iter_fair(self, allowed: list[bool] | None = None) -> Iterator[Session]:
        """Waiters in service order; ``allowed[rank]`` may be switched off mid-iteration."""
        for _, entry in service_order(self._classes, self._passes, self._strides, allowed):
            yield entry[3]

    def heads(self) -> list[SortedList]:
        """Each class's waiters as sorted ``(key, arrival, seq, session)`` entries, for
        the policy's service order (``entry[3]`` is the session). Not to be changed."""
        return self._classes

    @property
    def passes(self) -> list[float]:
        """The classes' stride passes (read only)."""
        return self._passes

    @property
    def strides(self) -> list[float]:
        """The classes' pass steps, ``1 / weight`` (read only)."""
        return self._strides

    def own_ahead(self, session: Session) -> int:
        """Waiters of the session's own class before it (O(log n))."""
        entry = session.entry
        return 0 if entry is None else self._classes[session.queue_rank].bisect_left(entry)

    def ahead_of(self, session: Session, lengths: Sequence[int] | None = None) -> int:
        """How many waiters the strategy serves before ``session`` (an O(log n) estimate).

        ``lengths`` replaces the class lengths the other classes are counted by (a
        closed class's waiters are not ahead of anyone, ``policy.open_lengths``).
        """
        entry = session.entry
        if entry is None:
            return 0
        rank = session.queue_rank
        own: int = self._classes[rank].bisect_left(entry)
        return stride_ahead(
            own, rank, self._passes, self._lengths if lengths is None else lengths, self._strides
        )

    @property
    def lengths(self) -> list[int]:
        """Waiters per class (read only)."""
        return self._lengths

    def oldest_waiting_since(self, rank: int, sample: int = 64) -> float | None:
        """Earliest ``waiting_since`` among the first waiters of a class (heads wait longest)."""
        entries = self._classes[rank]
        if not entries:
            return None
        since: float = min(entry[3].waiting_since for entry in entries.islice(0, sample))
        return since

    def reconfigure(
        self,
        strategy: Strategy,
        weights: Sequence[int],
        aging_seconds: float,
        ages: Sequence[bool] = (True,) * CLASS_COUNT,
    ) -> None:
        """Re-key every waiter for a new strategy or aging; O(n log n), only on change.

        ``ages[base_rank]`` says whether waiters of a base class age: a class with
        windows does not (``policy.class_ages``). It applies to waiters joining from
        now on and to the due ones, which are deferred; nothing is re-keyed for it.
        """
        self._ages = list(ages)
        strides = strides_of(weights)
        if strategy is self._strategy and aging_seconds == self._aging_seconds:
            self._strides = strides
            return
        waiting = [entry[3] for entries in self._classes for entry in entries]
        waiting.sort(key=lambda session: (session.arrival, session.seq))
        for session in waiting:
            session.principal.last_tags = [0] * CLASS_COUNT
            session.entry = None
        self._strategy = strategy
        self._strides = strides
        self._aging_seconds = aging_seconds
        self._classes = [SortedList() for _ in range(CLASS_COUNT)]
        self._lengths = [0] * CLASS_COUNT
        self._aging = [SortedList() for _ in range(CLASS_COUNT)]
        for session in waiting:
            if aging_seconds <= 0 and session.queue_rank < session.base_class.rank:
                session.queue_rank = max(session.queue_rank, session.base_class.rank)
            self.add(session)
