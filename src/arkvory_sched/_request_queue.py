"""The per-request admission queue: small objects and the ``shared`` strategy (R-SESS-3).

This is the behaviour from before sessions existed, kept as a strategy: a fixed number
of concurrent responses, a bounded FIFO of waiting requests with a per-principal cap.
The pure part only counts; the async wrapper turns a promotion into a woken request.
"""

from __future__ import annotations

from collections import OrderedDict

from ._model import RejectReason

__all__ = ["RequestQueue"]


class RequestQueue:
    __slots__ = ("_next_id", "_waiting", "_waiting_by_principal", "active", "max_active",
                 "per_principal", "queue_limit")  # fmt: skip

    def __init__(self, max_active: int, queue_limit: int, per_principal: int) -> None:
        self.max_active = max_active
        self.queue_limit = queue_limit
        self.per_principal = per_principal
        self.active = 0
        self._waiting: OrderedDict[int, str] = OrderedDict()
        self._waiting_by_principal: dict[str, int] = {}
        self._next_id = 0

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def try_acquire(self) -> bool:
        """Take a place at once if one is free and nobody waits ahead (FIFO)."""
        if self.active < self.max_active and not self._waiting:
            self.active += 1
            return True
        return False

    def enqueue(self, principal: str) -> int | RejectReason:
        """Wait for a place; returns a waiter id, or why the waiting room is closed."""
        if len(self._waiting) >= self.queue_limit:
            return RejectReason.REQUEST_QUEUE_FULL
        if self._waiting_by_principal.get(principal, 0) >= self.per_principal:
            return RejectReason.PRINCIPAL_LIMIT
        self._next_id += 1
        self._waiting[self._next_id] = principal
        self._waiting_by_principal[principal] = self._waiting_by_principal.get(principal, 0) + 1
        return self._next_id

    def release(self) -> list[int]:
        """Free a place; returns the waiters promoted into freed places (oldest first)."""
        if self.active > 0:
            self.active -= 1
        if not self._waiting:
            return []  # nobody waits, as for nearly every small object: no promotion loop
        return self.promote()

    def promote(self) -> list[int]:
        promoted: list[int] = []
        while self._waiting and self.active < self.max_active:
            waiter_id, principal = self._waiting.popitem(last=False)
            self._forget_principal(principal)
            self.active += 1
            promoted.append(waiter_id)
        return promoted

    def cancel(self, waiter_id: int) -> bool:
        """Give up waiting; False when the waiter was already promoted (it holds a place)."""
        principal = self._waiting.pop(waiter_id, None)
        if principal is None:
            return False
        self._forget_principal(principal)
        return True

    def drain(self) -> list[int]:
        """Remove every waiter (shutdown); returns their ids."""
        ids = list(self._waiting)
        self._waiting.clear()
        self._waiting_by_principal.clear()
        return ids

    def _forget_principal(self, principal: str) -> None:
        left = self._waiting_by_principal[principal] - 1
        if left:
            self._waiting_by_principal[principal] = left
        else:
            del self._waiting_by_principal[principal]
