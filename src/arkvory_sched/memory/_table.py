"""The session table: every session of the store, and the indexes that follow its state.

One part owns the live structures — the sessions by key, the principals, the active
map, the fair queue, the deadline buckets — and the counts derived from them (per
class waiting, active and paused; interactive slots; waiting bytes; the waiters of
principals under their share). Its transitions (enqueue, activate, pause, requeue,
complete, forget) are the only code that moves a session between states, and each
keeps every index and count in step, so no other part touches them one by one. The
other parts read these attributes; they change them only through the transitions.

It also holds the little state the transitions and the tick share: the mark epoch and
the free slots at the last marking (R-SESS-12), the session asked to yield
(R-PREEMPT-1), when a slot was last released, whether the store is closed, and the
count of slots left free while someone waits (``idle``, issue #28), which every
transition that moves a count keeps exact.
"""

from __future__ import annotations

import itertools
import math

from .._clock import Clock
from .._early_polls import EarlyPolls
from ..measures import IdleRecord
from ..policy import (
    CLASS_COUNT,
    NEWCOMER_CHECK_SECONDS,
    PAUSE_RETENTION_SECONDS,
    ClassGate,
    Strategy,
    class_ages,
    current_gate,
    no_show_at,
    usable_free_slots,
)
from ..settings import SchedulerSettings
from ._counters import Counters
from ._deadlines import DeadlineBuckets
from ._fairqueue import FairQueue
from ._intervals import DeliveredRanges
from ._session import ACTIVE, GONE, PAUSED, WAITING, PrincipalRecord, Session

__all__ = ["SessionTable", "ages_of"]

_SHARED = Strategy.SHARED


def ages_of(settings: SchedulerSettings) -> list[bool]:
    """Per base class, whether its waiters age: not a class with windows (ADR 0021)."""
    return [class_ages(settings.class_windows, rank) for rank in range(CLASS_COUNT)]


class SessionTable:
    """The sessions, their indexes and counts, and the transitions that keep them true.

    ``early`` is forgotten for a session that takes a slot; ``counters`` receives the
    wait of each activation, the score of its first estimate and each completion.
    """

    __slots__ = ("_clock", "_counters", "_early", "_gate", "active", "active_by_class",
                 "active_interactive", "closed", "deadlines", "free_at_mark", "idle",
                 "last_release", "mark_epoch", "mark_order", "paused_by_class", "pending_yield",
                 "principals", "queue", "sessions", "settings", "under_share_waiting",
                 "waiting_by_class", "waiting_bytes")  # fmt: skip

    def __init__(
        self,
        settings: SchedulerSettings,
        clock: Clock,
        *,
        early: EarlyPolls,
        counters: Counters,
    ) -> None:
        self.settings = settings
        self._clock = clock
        self._early = early
        self._counters = counters
        self.queue = FairQueue(settings.strategy, settings.weights, settings.aging_minutes * 60)
        self.queue.reconfigure(
            settings.strategy, settings.weights, settings.aging_minutes * 60, ages_of(settings)
        )
        self.sessions: dict[bytes, Session] = {}
        self.principals: dict[str, PrincipalRecord] = {}
        self.active: dict[bytes, Session] = {}
        self.deadlines = DeadlineBuckets(clock.monotonic())
        self.waiting_by_class = [0] * CLASS_COUNT
        self.active_by_class = [0] * CLASS_COUNT
        self.paused_by_class = [0] * CLASS_COUNT
        self.active_interactive = 0
        self.waiting_bytes = 0
        self.under_share_waiting = 0
        self.mark_epoch = 0
        self.free_at_mark = 0
        # The waiters the last tick marked, in the order it marked them (issue #28).
        self.mark_order: list[Session] = []
        self.pending_yield: Session | None = None
        self.last_release = -math.inf
        self.closed = False
        self.idle = IdleRecord(clock.monotonic())
        self._gate: ClassGate | None = None  # the windows' verdict, for the idle slots

    def configure(self, settings: SchedulerSettings) -> None:
        """Re-key the queue and the share count for ``settings``; new marks from now on."""
        self.settings = settings
        self.queue.reconfigure(
            settings.strategy, settings.weights, settings.aging_minutes * 60, ages_of(settings)
        )
        self.under_share_waiting = sum(
            principal.waiting
            for principal in self.principals.values()
            if principal.active < settings.per_principal
        )
        stop = not settings.preempt or settings.strategy is _SHARED
        if stop and self.pending_yield is not None:
            self.pending_yield.yield_requested = False
            self.pending_yield.blocked_by = None
            self.pending_yield = None
        self.mark_epoch += 1
        self.note_idle()

    # ================================================================ sessions
    def principal_record(self, name: str) -> PrincipalRecord:
        """The record of principal ``name``, created on its first session."""
        principal = self.principals.get(name)
        if principal is None:
            principal = PrincipalRecord(name)
            self.principals[name] = principal
        return principal

    def add(self, session: Session) -> None:
        """File a new session under its key and its principal (not yet waiting)."""
        self.sessions[session.key] = session
        principal = session.principal
        principal.sessions += 1
        principal.owned[session] = None

    # ================================================================ transitions
    def _share_account(self, principal: PrincipalRecord, sign: int) -> None:
        if principal.active < self.settings.per_principal:
            self.under_share_waiting += sign * principal.waiting

    def enqueue(self, session: Session, now: float) -> None:
        principal = session.principal
        self._share_account(principal, -1)
        principal.waiting += 1
        self._share_account(principal, +1)
        session.state = WAITING
        session.queue_rank = session.base_class.rank
        session.waiting_since = now
        session.check_at = session.back_at = now + NEWCOMER_CHECK_SECONDS
        session.no_show_at = no_show_at(session.check_at, NEWCOMER_CHECK_SECONDS)
        self.queue.add(session)
        self.waiting_by_class[session.base_class.rank] += 1
        self.waiting_bytes += session.object_size
        self.deadlines.schedule(session, session.no_show_at)
        self.note_idle()

    def dequeue(self, session: Session, granted: bool = False) -> None:
        principal = session.principal
        self._share_account(principal, -1)
        principal.waiting -= 1
        self._share_account(principal, +1)
        if granted:
            self.queue.granted(session, self._clock.monotonic())
        else:
            self.queue.remove(session)
        self.waiting_by_class[session.base_class.rank] -= 1
        self.waiting_bytes -= session.object_size
        self.deadlines.cancel(session)
        if not granted:  # a grant counts the slot it takes, in activate
            self.note_idle()

    def activate(self, session: Session, now: float) -> None:
        self.dequeue(session, granted=True)
        self._early.forget(session.key)
        principal = session.principal
        self._share_account(principal, -1)
        principal.active += 1
        self._share_account(principal, +1)
        session.state = ACTIVE
        session.slot_since = now
        session.last_activity = now
        session.blocked_by = None
        session.yield_requested = False
        session.mark = -1
        if session.delivered is None:
            session.delivered = DeliveredRanges()
        self.active[session.key] = session
        rank = session.base_class.rank
        self.active_by_class[rank] += 1
        if session.interactive:
            self.active_interactive += 1
        counters = self._counters
        counters.wait_histograms[rank].observe(max(0.0, now - session.waiting_since))
        if session.first_estimate is not None:
            counters.estimates.score(
                session.first_estimate_at, session.first_estimate, now, has_id=session.has_id
            )
            session.first_estimate = None
        pending = self.pending_yield
        if pending is not None and pending.blocked_by is session:
            # The head got a slot some other way: the yield is no longer needed.
            pending.yield_requested = False
            pending.blocked_by = None
            self.pending_yield = None
        self.note_idle()

    def _release_slot(self, session: Session) -> None:
        del self.active[session.key]
        session.ticket = None
        self.last_release = self._clock.monotonic()
        principal = session.principal
        self._share_account(principal, -1)
        principal.active -= 1
        self._share_account(principal, +1)
        self.active_by_class[session.base_class.rank] -= 1
        if session.interactive:
            self.active_interactive -= 1
        if self.pending_yield is session:
            self.pending_yield = None
        self.note_idle()

    def pause(self, session: Session, now: float) -> None:
        """R-SESS-9/10: free the slot but keep arrival and delivered ranges for 10 minutes."""
        self._release_slot(session)
        session.state = PAUSED
        session.yield_requested = False
        session.paused_until = now + PAUSE_RETENTION_SECONDS
        self.paused_by_class[session.base_class.rank] += 1
        self.deadlines.schedule(session, session.paused_until)

    def resume_paused(self, session: Session, now: float) -> None:
        self.paused_by_class[session.base_class.rank] -= 1
        session.aging_since = now
        self.enqueue(session, now)

    def requeue_yielded(self, session: Session, now: float) -> None:
        """A preempted protocol client yields at a range boundary: it waits again, keeping
        its arrival but not its accumulated aging, blocked while the head waits."""
        head = session.blocked_by
        self._release_slot(session)
        session.yield_requested = False
        session.aging_since = now
        self.enqueue(session, now)
        session.blocked_by = head
        if head is not None and head.state is WAITING:
            head.mark = self.mark_epoch

    def complete(self, session: Session) -> None:
        if session.state is ACTIVE:
            self._release_slot(session)
        elif session.state is WAITING:
            self.dequeue(session)
        elif session.state is PAUSED:
            self.paused_by_class[session.base_class.rank] -= 1
        self.forget(session)
        self._counters.completed += 1

    def expire_paused(self, session: Session) -> None:
        """A paused session's retention ran out: its arrival is forgotten (R-SESS-9)."""
        self.paused_by_class[session.base_class.rank] -= 1
        self.forget(session)

    def forget(self, session: Session) -> None:
        session.state = GONE
        self.deadlines.cancel(session)
        del self.sessions[session.key]
        principal = session.principal
        principal.sessions -= 1
        principal.owned.pop(session, None)
        if principal.sessions == 0:
            del self.principals[principal.name]

    def note_idle(self) -> None:
        """Count the slots left free while someone waits up to now, and go on with the
        count as it is now (issue #28): called by every transition that changes the
        waiting or active counts, and by the tick (a class's window opens or closes
        with time). The clock is read only when the count changes, so a full queue
        with every slot held costs a comparison."""
        settings = self.settings
        idle = 0
        if self.queue and len(self.active) < settings.sessions:
            room: list[int | None] = []
            if settings.class_windows:
                self._gate = current_gate(
                    self._gate, settings.class_windows, settings.sessions, self._clock.wall()
                )
                room = self._gate.room(self.active_by_class)
            idle = usable_free_slots(
                sessions=settings.sessions,
                reserve=settings.reserve,
                active=len(self.active),
                active_interactive=self.active_interactive,
                waiting_by_class=self.waiting_by_class,
                room=room,
            )
        if idle != self.idle.slots:
            self.idle = self.idle.after(self._clock.monotonic(), idle)

    # ================================================================ introspection
    def debug_invariants(self) -> list[str]:
        """Structural checks for tests; O(n). Returns the violated invariants."""
        problems: list[str] = []
        states = [s.state for s in self.sessions.values()]
        if states.count(ACTIVE) != len(self.active):
            problems.append("active index out of sync")
        if states.count(WAITING) != len(self.queue):
            problems.append("waiting index out of sync")
        if sum(self.waiting_by_class) != len(self.queue):
            problems.append("per-class waiting counters out of sync")
        if sum(self.active_by_class) != len(self.active):
            problems.append("per-class active counters out of sync")
        if sum(self.paused_by_class) != states.count(PAUSED):
            problems.append("per-class paused counters out of sync")
        interactive = sum(1 for s in self.active.values() if s.interactive)
        if interactive != self.active_interactive:
            problems.append("interactive counter out of sync")
        share = self.settings.per_principal
        expected_under = sum(p.waiting for p in self.principals.values() if p.active < share)
        if expected_under != self.under_share_waiting:
            problems.append("under-share waiting counter out of sync")
        for principal in self.principals.values():
            owned = [s for s in self.sessions.values() if s.principal is principal]
            if len(owned) != principal.sessions:
                problems.append(f"principal session count out of sync ({principal.sessions})")
            if list(principal.owned) != owned:
                problems.append("principal's own sessions out of sync")
            if sum(s.state is WAITING for s in owned) != principal.waiting:
                problems.append("principal waiting count out of sync")
            if sum(s.state is ACTIVE for s in owned) != principal.active:
                problems.append("principal active count out of sync")
        for session in self.sessions.values():
            if session.delivered is not None:
                spans = session.delivered.intervals()
                if len(spans) > 64:
                    problems.append("more than 64 delivered intervals")
                for (_, end), (start, _) in itertools.pairwise(spans):
                    if start <= end:
                        problems.append("delivered intervals overlap or touch")
        return problems
