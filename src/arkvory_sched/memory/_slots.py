"""Whether a slot is free for a session: the policy's slot rules over the live counts.

The admission asks it before starting a newcomer, a resumed or a marked waiter; the
tick asks it which head preemption serves and whom marking may pick. It reads the
session table and keeps one thing of its own: the windows' verdict (R-WIN-2), computed
again only when a class opens or closes.
"""

from __future__ import annotations

from collections.abc import Callable

from .._clock import Clock
from ..policy import (
    ClassGate,
    current_gate,
    in_next_round,
    keeps_its_turn,
    marked_in_turn,
    over_share_with_contenders,
    overdue_slot_may_be_taken,
    passable_classes,
    slot_free_for,
)
from ..settings import SchedulerSettings
from ._session import WAITING, Session
from ._table import SessionTable

__all__ = ["Slots"]


class Slots:
    """The slot checks of the in-memory store (R-CLASS-5, R-PREEMPT-2, R-WIN-2)."""

    __slots__ = ("_clock", "_gate", "_table", "settings")

    def __init__(self, settings: SchedulerSettings, clock: Clock, *, table: SessionTable) -> None:
        self.settings = settings
        self._clock = clock
        self._table = table
        self._gate: ClassGate | None = None

    def slot_free_for(self, session: Session) -> bool:
        settings, table = self.settings, self._table
        return slot_free_for(
            sessions=settings.sessions,
            reserve=settings.reserve,
            active=len(table.active),
            active_interactive=table.active_interactive,
            interactive=session.interactive,
            over_share=self.over_share_with_contenders(session),
        ) and self._window_allows(session)

    def _window_allows(self, session: Session) -> bool:
        """R-WIN-2: its base class is open, or below its share of slots outside."""
        if not self.settings.class_windows:
            return True
        rank = session.base_class.rank
        return self.class_gate().may_start(rank, self._table.active_by_class[rank])

    def class_gate(self) -> ClassGate:
        """The windows' verdict now, computed again only when a class opens or closes
        (or the settings or the wall clock change)."""
        settings = self.settings
        gate = current_gate(
            self._gate, settings.class_windows, settings.sessions, self._clock.wall()
        )
        self._gate = gate
        return gate

    def over_share_with_contenders(self, session: Session) -> bool:
        """R-CLASS-5: beyond its share only while no other principal's waiter contends."""
        return over_share_with_contenders(
            session.principal.active,
            self.settings.per_principal,
            self._table.under_share_waiting > 0,
        )

    def blocked(self, session: Session) -> bool:
        """R-PREEMPT-2: a yielder takes no slot while the head it yielded to waits."""
        head = session.blocked_by
        if head is None:
            return False
        if head.state is WAITING:
            return True
        session.blocked_by = None
        return False

    def may_take_marked_slot(
        self, session: Session, now: float, next_free: Callable[[float], float]
    ) -> bool:
        """A waiter that comes takes a free slot when it was marked for one (a back-up
        after its grace), or when the slot has been left free past the idle grace
        while nobody marked came (issue #28). ``next_free(now)`` is when the next slot
        is expected to free, asked only when a waiter marked before this one still
        waits."""
        if self.blocked(session):
            return False
        table = self._table
        last_release = table.last_release
        if overdue_slot_may_be_taken(now, last_release) and in_next_round(
            table.queue.own_ahead(session), self.settings.sessions
        ):
            return self.slot_free_for(session)
        free = self.settings.sessions - len(table.active)
        if session.mark != table.mark_epoch or free <= 0:
            return False
        if not marked_in_turn(
            earlier_waiting=self._marked_before(session, now, next_free),
            free=free,
            backup=session.mark_backup,
            now=now,
            last_release=last_release,
        ):
            return False
        return self.slot_free_for(session)

    def _marked_before(
        self, session: Session, now: float, next_free: Callable[[float], float]
    ) -> int:
        """Waiters the last tick marked before ``session`` that still wait for a slot
        and keep their turn (:func:`~arkvory_sched.policy.keeps_its_turn`; 0 for one
        marked otherwise: the head a yield was made for). ``next_free`` is asked once,
        and only if such a waiter is found: the first marked waiter never asks it."""
        table = self._table
        epoch, earlier = table.mark_epoch, 0
        soonest: float | None = None
        for marked in table.mark_order:
            if marked is session:
                return earlier
            if marked.state is not WAITING or marked.mark != epoch:
                continue
            if soonest is None:
                soonest = next_free(now)
            earlier += keeps_its_turn(marked.check_at, marked.back_at, now, soonest)
        return 0

    def newcomer_starts_now(self, session: Session) -> bool:
        """A newcomer starts at once on a free slot when nobody waits whom it must not
        pass: an open class's newcomer passes the waiters of closed classes (issue #26)."""
        if self._table.queue and not self._passes_every_waiter(session):
            return False
        return self.slot_free_for(session)

    def _passes_every_waiter(self, session: Session) -> bool:
        if not self.settings.class_windows:
            return False
        passable = passable_classes(self.class_gate(), session.base_class.rank)
        return all(
            not waiting or rank in passable
            for rank, waiting in enumerate(self._table.waiting_by_class)
        )

    def may_start_without_queue(self, session: Session) -> bool:
        """A resumed session starts at once only if nobody else waits (R-SESS-9)."""
        return len(self._table.queue) == 1 and self.slot_free_for(session)
