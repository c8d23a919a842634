"""Answers to polls that come well before their ``checkAt``, from what a process knows.

A client that ignores ``Retry-After`` and polls in a loop with its download id would
cost the shared store two statements per poll (issue #26): a few such clients could
take the primary that every process shares. Each process remembers the last waiting
answer it gave each session, and a poll that comes early by the policy's rule
(:func:`~arkvory_sched.policy.early_poll`) gets that answer again — the same place,
the same start, the same ``checkAt`` and ticket, with the ``Retry-After`` left — and
the store is not asked. Nothing is written, so the waiter's place and its no-show
deadline stay as its last real poll left them: it never loses its place for asking
early, and its first poll at ``checkAt`` is answered as always (ADR 0029). A waiter
marked while a slot is free is decided whenever it asks (it takes the slot), and so is
a newcomer's first poll: its first answer has no place yet, so it is not remembered.

Only polls with a download id are answered here (a request without one is held by
the server, which asks again to notice a free slot at once), and only when the ticket
they bring is the one the remembered answer carried (or none): a client that was
admitted meanwhile, through another process, brings an active session's ticket and
is decided by the store. Memory is bounded: at most :data:`EARLY_POLL_CAPACITY`
answers, the oldest given forgotten first, whatever the number of keys that poll.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Final

from ._model import Queued
from .policy import early_poll, queued_retry_after

__all__ = ["EARLY_POLL_CAPACITY", "EarlyPolls"]

# About 300 bytes an answer: a few MiB per process. A key forgotten early only means
# that its next early poll is decided by the store, as before.
EARLY_POLL_CAPACITY: Final = 16_384
# Wall time minus queue time drifts in its last bits as both advance; a change below
# this is not a jump of the wall clock, and the answer is repeated to the bit.
WALL_JUMP_SECONDS: Final = 0.001


@dataclass(frozen=True, slots=True)
class _Given:
    answer: Queued
    check_at: float  # queue time
    delay: float  # seconds from the answer to check_at
    wall_offset: float  # wall time minus queue time when it was given


class EarlyPolls:
    """The last waiting answer given to each session, for its early polls."""

    def __init__(self, capacity: int = EARLY_POLL_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self._capacity = capacity
        self._given: OrderedDict[bytes, _Given] = OrderedDict()
        self.answered = 0
        """Early polls answered here since the process started (a counter)."""

    def __len__(self) -> int:
        return len(self._given)

    def remember(self, key: bytes, answer: Queued, check_at: float, delay: float) -> None:
        """``answer`` was given to session ``key`` now, asking it back at queue time
        ``check_at``, ``delay`` seconds from now."""
        given = self._given
        given[key] = _Given(answer, check_at, delay, answer.check_at - check_at)
        given.move_to_end(key)
        if len(given) > self._capacity:
            given.popitem(last=False)

    def is_early(self, key: bytes, ticket: str | None, now: float) -> bool:
        """Whether a poll of ``key`` at queue time ``now`` bringing ``ticket`` may be told
        the remembered answer: one is remembered, with that ticket (or the poll brings
        none), and the poll comes well before its ``checkAt``."""
        given = self._given.get(key)
        if given is None or (ticket is not None and ticket != given.answer.ticket):
            return False
        return early_poll(now, given.check_at, given.delay)

    def answer(
        self, key: bytes, ticket: str | None, now: float, wall_offset: float
    ) -> Queued | None:
        """The remembered answer with the ``Retry-After`` left, when :meth:`is_early`;
        None when the store must decide. The caller has made sure the session may not
        take a slot now: a marked waiter takes a free one whenever it asks.

        ``wall_offset`` is wall time minus queue time now: the announced times move
        with a wall clock that jumped since the answer (R-RES-5), the wait does not."""
        if not self.is_early(key, ticket, now):
            return None
        given = self._given[key]
        self.answered += 1
        told = given.answer
        shift = wall_offset - given.wall_offset
        if abs(shift) < WALL_JUMP_SECONDS:
            return replace(told, retry_after=queued_retry_after(given.check_at - now))
        return replace(
            told,
            starts_at=told.starts_at + shift,
            starts_earliest=told.starts_earliest + shift,
            starts_latest=told.starts_latest + shift,
            check_at=told.check_at + shift,
            retry_after=queued_retry_after(given.check_at - now),
        )

    def forget(self, key: bytes) -> None:
        """The session left the queue here (admitted, cancelled): no early answer."""
        self._given.pop(key, None)

    def clear(self) -> None:
        """Settings changed: every next poll is decided anew (R-STRAT-4)."""
        self._given.clear()
