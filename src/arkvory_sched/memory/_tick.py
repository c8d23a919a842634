"""The periodic tick: expiry, idle release, aging, preemption and marking.

Proportional to what changed (expirations, promotions, marks) plus the active slots.
It moves sessions only through the table's transitions, asks :class:`Slots` who may
take a slot, and refreshes the answers' table of when slots free (R-EST-1).
"""

from __future__ import annotations

from dataclasses import dataclass

from .._clock import Clock
from ..policy import (
    MARK_SCAN_SLACK,
    TAIL_ONLY_HOLD_SECONDS,
    SlotShares,
    Strategy,
    YieldHead,
    choose_marks,
    choose_victim,
    closed_ranks,
    finishing_soon,
    marking_budget,
    take_room,
)
from ..settings import SchedulerSettings
from ._answers import Answers
from ._counters import Counters
from ._session import ACTIVE, PAUSED, WAITING, Session
from ._slots import Slots
from ._table import SessionTable

__all__ = ["Tick", "TickOutcome"]

_SHARED = Strategy.SHARED


@dataclass(frozen=True, slots=True)
class TickOutcome:
    expired: int
    idle_released: int
    promoted: int
    marked: int
    preempted: bool


class Tick:
    """The tick of the in-memory store; proportional to what changed."""

    __slots__ = ("_answers", "_clock", "_counters", "_slots", "_table", "settings")

    def __init__(
        self,
        settings: SchedulerSettings,
        clock: Clock,
        *,
        table: SessionTable,
        slots: Slots,
        answers: Answers,
        counters: Counters,
    ) -> None:
        self.settings = settings
        self._clock = clock
        self._table = table
        self._slots = slots
        self._answers = answers
        self._counters = counters

    def tick(self) -> TickOutcome:
        """Expire, release idle slots, age, preempt, mark (R-RES-2)."""
        now = self._clock.monotonic()
        # The transitions keep the idle slots' count; only a window that opened or
        # closed since is left for the tick to notice (issue #28).
        self._table.note_idle()
        expired = self._expire(now)
        idle = self._release_idle(now)
        promoted = self._table.queue.promote_aged(now)
        self._answers.note_busy(now)
        shares = self._answers.refresh_finish_table(now)
        preempted = self._maybe_preempt(now)  # marks a yield; the slots stay as they are
        marked = self._mark_waiters(now, shares)
        return TickOutcome(expired, idle, promoted, marked, preempted)

    def _aging_on(self) -> bool:
        return self.settings.aging_minutes > 0

    def _expire(self, now: float) -> int:
        table = self._table
        deadlines = table.deadlines
        expired = 0
        for session in list(deadlines.due(now)):
            if session.state is WAITING:
                if session.no_show_at > now:
                    deadlines.schedule(session, session.no_show_at)
                    continue
                table.dequeue(session)
                table.forget(session)
                self._counters.no_shows += 1
                expired += 1
            elif session.state is PAUSED:
                if session.paused_until > now:
                    deadlines.schedule(session, session.paused_until)
                    continue
                table.expire_paused(session)
                expired += 1
        return expired

    def _release_idle(self, now: float) -> int:
        idle_seconds = self.settings.idle_seconds
        tail_hold = min(TAIL_ONLY_HOLD_SECONDS, idle_seconds)
        released = 0
        for session in list(self._table.active.values()):
            if session.in_flight:
                continue
            short = session.start_offset is None or session.interrupted
            limit = tail_hold if short else idle_seconds
            if now - session.last_activity > limit:
                self._table.pause(session, now)
                self._counters.idle_releases += 1
                released += 1
        return released

    def _maybe_preempt(self, now: float) -> bool:
        """R-PREEMPT-1..3: at most one yield per tick, only for a head still without a slot."""
        settings, table = self.settings, self._table
        if not settings.preempt or settings.strategy is _SHARED:
            return False  # R-STRAT-3/4: under shared, active sessions are not interrupted
        if table.closed:
            return False  # R-RES-4: after close() active downloads are finished
        pending = table.pending_yield
        if pending is not None:
            if pending.state is ACTIVE and pending.yield_requested:
                return False
            table.pending_yield = None
        head = self._first_eligible_waiter()
        if head is None or self._slots.slot_free_for(head):
            return False
        victim = choose_victim(
            table.active.values(),
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
        table.pending_yield = victim
        self._counters.preemptions += 1
        return True

    def _first_eligible_waiter(self) -> Session | None:
        """The head preemption serves: not blocked, not over its share, and not of a
        class outside its windows (R-WIN-2: a closed class never makes anyone yield,
        even with an outside share left)."""
        table, slots = self._table, self._slots
        scanned = 0
        gate = slots.class_gate() if self.settings.class_windows else None
        allowed = None
        if gate is not None:
            room = gate.room(table.active_by_class)
            closed = closed_ranks(gate, room, self._aging_on(), table.waiting_by_class)
            allowed = [not skip for skip in closed]
        for session in table.queue.iter_fair(allowed):
            scanned += 1
            if scanned > MARK_SCAN_SLACK:
                return None
            if slots.blocked(session) or slots.over_share_with_contenders(session):
                continue
            if gate is not None and gate.closed(session.base_class.rank):
                continue
            return session
        return None

    def _mark_waiters(self, now: float, shares: SlotShares) -> int:
        """R-SESS-12: mark twice as many waiters as there are (soon) free slots."""
        table = self._table
        table.mark_epoch += 1
        settings = self.settings
        soon = soon_interactive = 0
        for session, rate in zip(table.active.values(), shares.held, strict=True):
            if finishing_soon(session.remaining_bytes(), rate, session.yield_requested):
                soon += 1
                soon_interactive += session.interactive
        budget = marking_budget(
            sessions=settings.sessions,
            reserve=settings.reserve,
            active=len(table.active),
            active_interactive=table.active_interactive,
            soon=soon,
            soon_interactive=soon_interactive,
        )
        table.free_at_mark = budget.free
        table.mark_order = []
        if not budget.free or not table.queue:
            return 0
        queue = table.queue
        may_take = self._may_be_marked
        closed: list[bool] = []
        if settings.class_windows:
            # R-WIN-2: a closed class is marked only within the slots it may still take,
            # and a rank holding only such waiters is not scanned at all.
            gate = self._slots.class_gate()
            room = gate.room(table.active_by_class)
            closed = closed_ranks(gate, room, self._aging_on(), table.waiting_by_class)

            def may_take(entry: tuple[float, float, int, Session]) -> bool:
                return self._may_be_marked(entry) and take_room(room, entry[3].base_class.rank)

        marks = choose_marks(queue.heads(), queue.passes, queue.strides, budget, may_take, closed)
        epoch = table.mark_epoch
        for entry, backup in marks:
            session = entry[3]
            session.mark = epoch
            session.mark_backup = backup
            table.mark_order.append(session)
        return len(marks)

    def _may_be_marked(self, entry: tuple[float, float, int, Session]) -> bool:
        session = entry[3]
        slots = self._slots
        return not (slots.blocked(session) or slots.over_share_with_contenders(session))
