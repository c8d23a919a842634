"""The periodic tick: expiry, idle release, aging, preemption and marking."""

from __future__ import annotations

from ..policy import (
    MARK_SCAN_SLACK,
    TAIL_ONLY_HOLD_SECONDS,
    YieldHead,
    choose_marks,
    choose_victim,
    closed_ranks,
    finishing_soon,
    marking_budget,
    take_room,
)
from ._core_estimates import CoreEstimates
from ._core_state import _ACTIVE, _PAUSED, _SHARED, _WAITING, TickOutcome
from ._session import Session

__all__ = ["CoreTick"]


class CoreTick(CoreEstimates):
    """The tick of :class:`SchedulerCore`; proportional to what changed."""

    # ================================================================ tick
    def tick(self) -> TickOutcome:
        """Expire, release idle slots, age, preempt, mark; see the rules of ``_core``."""
        now = self._clock.monotonic()
        expired = self._expire(now)
        idle = self._release_idle(now)
        promoted = self._queue.promote_aged(now)
        self._refresh_finish_table(now)
        preempted = self._maybe_preempt(now)
        marked = self._mark_waiters(now)
        return TickOutcome(expired, idle, promoted, marked, preempted)

    def record_tick_duration(self, seconds: float) -> None:
        self._last_tick_seconds = seconds

    @property
    def last_tick_seconds(self) -> float:
        return self._last_tick_seconds

    def _expire(self, now: float) -> int:
        expired = 0
        for session in list(self._deadlines.due(now)):
            if session.state is _WAITING:
                if session.no_show_at > now:
                    self._deadlines.schedule(session, session.no_show_at)
                    continue
                self._dequeue(session)
                self._forget(session)
                self._counters.no_shows += 1
                expired += 1
            elif session.state is _PAUSED:
                if session.paused_until > now:
                    self._deadlines.schedule(session, session.paused_until)
                    continue
                self._by_class_paused[session.base_class.rank] -= 1
                self._forget(session)
                expired += 1
        return expired

    def _release_idle(self, now: float) -> int:
        idle_seconds = self._settings.idle_seconds
        tail_hold = min(TAIL_ONLY_HOLD_SECONDS, idle_seconds)
        released = 0
        for session in list(self._active.values()):
            if session.in_flight:
                continue
            short = session.start_offset is None or session.interrupted
            limit = tail_hold if short else idle_seconds
            if now - session.last_activity > limit:
                self._pause(session, now)
                self._counters.idle_releases += 1
                released += 1
        return released

    def _maybe_preempt(self, now: float) -> bool:
        """R-PREEMPT-1..3: at most one yield per tick, only for a head still without a slot."""
        settings = self._settings
        if not settings.preempt or settings.strategy is _SHARED:
            return False  # R-STRAT-3/4: under shared, active sessions are not interrupted
        if self._closed:
            return False  # R-RES-4: after close() active downloads are finished
        pending = self._pending_yield
        if pending is not None:
            if pending.state is _ACTIVE and pending.yield_requested:
                return False
            self._pending_yield = None
        head = self._first_eligible_waiter()
        if head is None or self._slot_free_for(head):
            return False
        victim = choose_victim(
            self._active.values(),
            YieldHead(
                head.principal.name, head.queue_rank, head.interactive, head.principal.active
            ),
            now=now,
            per_principal=settings.per_principal,
        )
        if victim is None:
            return False
        victim.yield_requested = True
        victim.blocked_by = head
        self._pending_yield = victim
        self._counters.preemptions += 1
        return True

    def _first_eligible_waiter(self) -> Session | None:
        """The head preemption serves: not blocked, not over its share, and not of a
        class outside its windows (R-WIN-2: a closed class never makes anyone yield,
        even with an outside share left)."""
        scanned = 0
        gate = self._class_gate() if self._settings.class_windows else None
        allowed = None
        if gate is not None:
            room = gate.room(self._by_class_active)
            closed = closed_ranks(gate, room, self._aging_on(), self._by_class_waiting)
            allowed = [not skip for skip in closed]
        for session in self._queue.iter_fair(allowed):
            scanned += 1
            if scanned > MARK_SCAN_SLACK:
                return None
            if self._blocked(session) or self._over_share_with_contenders(session):
                continue
            if gate is not None and gate.closed(session.base_class.rank):
                continue
            return session
        return None

    def _mark_waiters(self, now: float) -> int:
        """R-SESS-12: mark twice as many waiters as there are (soon) free slots."""
        self._mark_epoch += 1
        settings = self._settings
        soon = soon_interactive = 0
        per_session_rate = self._current_rate() / max(1, len(self._active))
        for session in self._active.values():
            if finishing_soon(session.remaining_bytes(), per_session_rate, session.yield_requested):
                soon += 1
                soon_interactive += session.interactive
        budget = marking_budget(
            sessions=settings.sessions,
            reserve=settings.reserve,
            active=len(self._active),
            active_interactive=self._active_interactive,
            soon=soon,
            soon_interactive=soon_interactive,
        )
        self._free_at_mark = budget.free
        if not budget.free or not self._queue:
            return 0
        queue = self._queue
        may_take = self._may_be_marked
        closed: list[bool] = []
        if settings.class_windows:
            # R-WIN-2: a closed class is marked only within the slots it may still take,
            # and a rank holding only such waiters is not scanned at all.
            gate = self._class_gate()
            room = gate.room(self._by_class_active)
            closed = closed_ranks(gate, room, self._aging_on(), self._by_class_waiting)

            def may_take(entry: tuple[float, float, int, Session]) -> bool:
                return self._may_be_marked(entry) and take_room(room, entry[3].base_class.rank)

        marks = choose_marks(queue.heads(), queue.passes, queue.strides, budget, may_take, closed)
        epoch = self._mark_epoch
        for entry, backup in marks:
            session = entry[3]
            session.mark = epoch
            session.mark_backup = backup
        return len(marks)

    def _may_be_marked(self, entry: tuple[float, float, int, Session]) -> bool:
        session = entry[3]
        return not (self._blocked(session) or self._over_share_with_contenders(session))
