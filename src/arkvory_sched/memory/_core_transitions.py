"""Moving a session between states, and whether a slot is free for it.

Every transition keeps the indexes and counters of :class:`CoreState` in step (the
queue, the active map, per-class and per-principal counts, the under-share count),
so the rest of the core never touches them one by one.
"""

from __future__ import annotations

from ..policy import (
    NEWCOMER_CHECK_SECONDS,
    PAUSE_RETENTION_SECONDS,
    ClassGate,
    backup_may_take_slot,
    current_gate,
    no_show_at,
    over_share_with_contenders,
    passable_classes,
    slot_free_for,
)
from ._core_state import _ACTIVE, _GONE, _PAUSED, _WAITING, CoreState
from ._intervals import DeliveredRanges
from ._session import (
    PrincipalRecord,
    Session,
)

__all__ = ["CoreTransitions"]


class CoreTransitions(CoreState):
    """Slot checks and the state transitions of sessions."""

    # ================================================================ slots
    def _slot_free_for(self, session: Session) -> bool:
        settings = self._settings
        return slot_free_for(
            sessions=settings.sessions,
            reserve=settings.reserve,
            active=len(self._active),
            active_interactive=self._active_interactive,
            interactive=session.interactive,
            over_share=self._over_share_with_contenders(session),
        ) and self._window_allows(session)

    def _window_allows(self, session: Session) -> bool:
        """R-WIN-2: its base class is open, or below its share of slots outside."""
        if not self._settings.class_windows:
            return True
        rank = session.base_class.rank
        return self._class_gate().may_start(rank, self._by_class_active[rank])

    def _class_gate(self) -> ClassGate:
        """The windows' verdict now, computed again only when a class opens or closes
        (or the settings or the wall clock change)."""
        settings = self._settings
        gate = current_gate(
            self._gate, settings.class_windows, settings.sessions, self._clock.wall()
        )
        self._gate = gate
        return gate

    def _over_share_with_contenders(self, session: Session) -> bool:
        """R-CLASS-5: beyond its share only while no other principal's waiter contends."""
        return over_share_with_contenders(
            session.principal.active, self._settings.per_principal, self._under_share_waiting > 0
        )

    def _blocked(self, session: Session) -> bool:
        """R-PREEMPT-2: a yielder takes no slot while the head it yielded to waits."""
        head = session.blocked_by
        if head is None:
            return False
        if head.state is _WAITING:
            return True
        session.blocked_by = None
        return False

    def _may_take_marked_slot(self, session: Session, now: float) -> bool:
        if session.mark != self._mark_epoch or self._blocked(session):
            return False
        if session.mark_backup and not backup_may_take_slot(now, self._last_release):
            return False
        return self._slot_free_for(session)

    def _newcomer_starts_now(self, session: Session) -> bool:
        """A newcomer starts at once on a free slot when nobody waits whom it must not
        pass: an open class's newcomer passes the waiters of closed classes (issue #26)."""
        if self._queue and not self._passes_every_waiter(session):
            return False
        return self._slot_free_for(session)

    def _passes_every_waiter(self, session: Session) -> bool:
        if not self._settings.class_windows:
            return False
        passable = passable_classes(self._class_gate(), session.base_class.rank)
        return all(
            not waiting or rank in passable for rank, waiting in enumerate(self._by_class_waiting)
        )

    def _may_start_without_queue(self, session: Session) -> bool:
        """A resumed session starts at once only if nobody else waits (R-SESS-9)."""
        return len(self._queue) == 1 and self._slot_free_for(session)

    # ================================================================ transitions
    def _share_account(self, principal: PrincipalRecord, sign: int) -> None:
        if principal.active < self._settings.per_principal:
            self._under_share_waiting += sign * principal.waiting

    def _enqueue(self, session: Session, now: float) -> None:
        principal = session.principal
        self._share_account(principal, -1)
        principal.waiting += 1
        self._share_account(principal, +1)
        session.state = _WAITING
        session.queue_rank = session.base_class.rank
        session.waiting_since = now
        session.check_at = now + NEWCOMER_CHECK_SECONDS
        session.no_show_at = no_show_at(session.check_at, NEWCOMER_CHECK_SECONDS)
        self._queue.add(session)
        self._by_class_waiting[session.base_class.rank] += 1
        self._waiting_bytes += session.object_size
        self._deadlines.schedule(session, session.no_show_at)

    def _dequeue(self, session: Session, granted: bool = False) -> None:
        principal = session.principal
        self._share_account(principal, -1)
        principal.waiting -= 1
        self._share_account(principal, +1)
        if granted:
            self._queue.granted(session, self._clock.monotonic())
        else:
            self._queue.remove(session)
        self._by_class_waiting[session.base_class.rank] -= 1
        self._waiting_bytes -= session.object_size
        self._deadlines.cancel(session)

    def _activate(self, session: Session, now: float) -> None:
        self._dequeue(session, granted=True)
        self._early.forget(session.key)
        principal = session.principal
        self._share_account(principal, -1)
        principal.active += 1
        self._share_account(principal, +1)
        session.state = _ACTIVE
        session.slot_since = now
        session.last_activity = now
        session.blocked_by = None
        session.yield_requested = False
        session.mark = -1
        if session.delivered is None:
            session.delivered = DeliveredRanges()
        self._active[session.key] = session
        rank = session.base_class.rank
        self._by_class_active[rank] += 1
        if session.interactive:
            self._active_interactive += 1
        self._wait_histograms[rank].observe(max(0.0, now - session.waiting_since))
        if session.first_estimate is not None:
            self._estimates.score(session.first_estimate_at, session.first_estimate, now)
            session.first_estimate = None
        pending = self._pending_yield
        if pending is not None and pending.blocked_by is session:
            # The head got a slot some other way: the yield is no longer needed.
            pending.yield_requested = False
            pending.blocked_by = None
            self._pending_yield = None

    def _release_slot(self, session: Session) -> None:
        del self._active[session.key]
        session.ticket = None
        self._last_release = self._clock.monotonic()
        principal = session.principal
        self._share_account(principal, -1)
        principal.active -= 1
        self._share_account(principal, +1)
        self._by_class_active[session.base_class.rank] -= 1
        if session.interactive:
            self._active_interactive -= 1
        if self._pending_yield is session:
            self._pending_yield = None

    def _pause(self, session: Session, now: float) -> None:
        """R-SESS-9/10: free the slot but keep arrival and delivered ranges for 10 minutes."""
        self._release_slot(session)
        session.state = _PAUSED
        session.yield_requested = False
        session.paused_until = now + PAUSE_RETENTION_SECONDS
        self._by_class_paused[session.base_class.rank] += 1
        self._deadlines.schedule(session, session.paused_until)

    def _resume_paused(self, session: Session, now: float) -> None:
        self._by_class_paused[session.base_class.rank] -= 1
        session.aging_since = now
        self._enqueue(session, now)

    def _requeue_yielded(self, session: Session, now: float) -> None:
        """A preempted protocol client yields at a range boundary: it waits again, keeping
        its arrival but not its accumulated aging, blocked while the head waits."""
        head = session.blocked_by
        self._release_slot(session)
        session.yield_requested = False
        session.aging_since = now
        self._enqueue(session, now)
        session.blocked_by = head
        if head is not None and head.state is _WAITING:
            head.mark = self._mark_epoch

    def _complete(self, session: Session) -> None:
        if session.state is _ACTIVE:
            self._release_slot(session)
        elif session.state is _WAITING:
            self._dequeue(session)
        elif session.state is _PAUSED:
            self._by_class_paused[session.base_class.rank] -= 1
        self._forget(session)
        self._counters.completed += 1

    def _forget(self, session: Session) -> None:
        session.state = _GONE
        self._deadlines.cancel(session)
        del self._sessions[session.key]
        principal = session.principal
        principal.sessions -= 1
        principal.owned.pop(session, None)
        if principal.sessions == 0:
            del self._principals[principal.name]
