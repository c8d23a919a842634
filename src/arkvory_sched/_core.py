"""The pure scheduling core: sessions, slots, queue, estimates — no I/O, no sleeps.

Rules of this file:

* Time comes from the injected :class:`Clock` and nowhere else; the queue runs on its
  monotonic side, tickets and announced start times on its wall side (R-RES-5).
* Every public method finishes in O(log n) of the waiting count, except ``tick`` which is
  proportional to what changed (expirations, promotions, marks) plus the active slots,
  and ``configure`` when it must re-key the queue for another strategy.
* Nothing grows without a bound: a request beyond a limit is answered ``Rejected``.

The rules it applies — order, eligibility, marks, preemption, estimates — are the
policy's (:mod:`arkvory_sched.policy`, ADR 0016): this class gathers their inputs from
its live structures and applies the results. The async :class:`InMemoryDownloadScheduler`
wraps this class; the simulation and the hypothesis state machine drive it directly.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

from ._accuracy import EstimateScorer
from ._classes import DownloadClass, PrincipalKind, applied_class, default_class
from ._clock import Clock
from ._deadlines import DeadlineBuckets
from ._fairqueue import FairQueue
from ._grant_state import GrantState
from ._histogram import Histogram
from ._intervals import DeliveredRanges
from ._model import (
    Admitted,
    ByteRange,
    ClassStats,
    Decision,
    Delivered,
    DeliveryOutcome,
    DownloadRequest,
    Grant,
    HistogramSnapshot,
    Queued,
    Rejected,
    RejectReason,
    SchedulerStats,
)
from ._rate import PeakRateMeter
from ._request_admission import PendingRequest, RequestAdmission
from ._session import (
    PrincipalRecord,
    Session,
    SessionKeys,
    SessionState,
    session_key,
)
from ._settings import SchedulerSettings, Strategy
from ._tickets import TicketSigner
from .policy import (
    CLASS_COUNT,
    MARK_SCAN_SLACK,
    NEWCOMER_CHECK_SECONDS,
    PAUSE_RETENTION_SECONDS,
    SHUTDOWN_RETRY_SECONDS,
    TAIL_ONLY_HOLD_SECONDS,
    TICKET_REUSE_SECONDS,
    YieldHead,
    backup_may_take_slot,
    busy_retry_after,
    check_delay,
    choose_marks,
    choose_victim,
    estimate_interval,
    estimate_rate,
    estimate_start,
    finish_table,
    finishing_soon,
    marking_budget,
    no_show_at,
    over_share_with_contenders,
    sets_start,
    slot_free_for,
    uses_sessions,
    validated_download_id,
)

__all__ = ["GrantState", "PendingRequest", "SchedulerCore", "TickOutcome"]

# Enum members bound once (why: _model.py, next to RangeKind).
_WAITING, _ACTIVE = SessionState.WAITING, SessionState.ACTIVE
_PAUSED, _GONE = SessionState.PAUSED, SessionState.GONE
_SHARED = Strategy.SHARED


@dataclass(frozen=True, slots=True)
class TickOutcome:
    expired: int
    idle_released: int
    promoted: int
    marked: int
    preempted: bool


@dataclass(slots=True)
class _Counters:
    admitted: int = 0
    completed: int = 0
    no_shows: int = 0
    idle_releases: int = 0
    preemptions: int = 0
    rejections: dict[RejectReason, int] = field(default_factory=dict)


class SchedulerCore:
    """Deterministic download-session scheduler (the in-memory implementation's brain)."""

    def __init__(
        self,
        settings: SchedulerSettings,
        clock: Clock,
        signer: TicketSigner | None = None,
    ) -> None:
        self._settings = settings
        self._clock = clock
        self._signer = signer
        self._queue = FairQueue(settings.strategy, settings.weights, settings.aging_minutes * 60)
        self._sessions: dict[bytes, Session] = {}
        self._keys = SessionKeys()
        self._principals: dict[str, PrincipalRecord] = {}
        self._active: dict[bytes, Session] = {}
        self._active_interactive = 0
        self._grants: dict[int, GrantState] = {}
        self._next_token = 0
        self._seq = 0
        self._deadlines = DeadlineBuckets(clock.monotonic())
        self._mark_epoch = 0
        self._free_at_mark = 0
        self._last_release = -math.inf
        self._under_share_waiting = 0
        self._pending_yield: Session | None = None
        self._rate = PeakRateMeter()
        self._last_rate = 0.0
        self._waiting_bytes = 0
        self._finish_table: list[float] = []
        self._finish_table_at = -math.inf
        self._by_class_waiting = [0] * CLASS_COUNT
        self._by_class_active = [0] * CLASS_COUNT
        self._by_class_paused = [0] * CLASS_COUNT
        self._bytes_by_class = [0] * CLASS_COUNT
        self._wait_histograms = [Histogram() for _ in range(CLASS_COUNT)]
        self._estimates = EstimateScorer()
        # Per-request places (small objects, shared): the component both stores use.
        self._requests = RequestAdmission(
            settings, clock, rate=self._rate, bytes_by_class=self._bytes_by_class
        )
        self._counters = _Counters()
        self._last_tick_seconds = 0.0
        self._closed = False

    # ================================================================ properties
    @property
    def settings(self) -> SchedulerSettings:
        return self._settings

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def requests(self) -> RequestAdmission:
        """The per-request places; the async wrapper waits on them."""
        return self._requests

    @property
    def active_count(self) -> int:
        return len(self._active)

    @property
    def waiting_count(self) -> int:
        return len(self._queue)

    @property
    def session_count(self) -> int:
        return len(self._sessions)

    # ================================================================ admission
    def admit(self, request: DownloadRequest) -> Decision | PendingRequest:
        """Decide one GET (see ``DownloadScheduler.admit``); never blocks."""
        now = self._clock.monotonic()
        download_id = validated_download_id(request.download_id)
        base = request.base_class or default_class(request.principal_kind)
        cls = applied_class(base, request.requested_class)
        sessions = uses_sessions(self._settings, request.object_size)
        key: bytes | None = None
        if sessions or self._holds_slot(request.principal):
            # A small object hashes no key unless its principal holds a slot: only then
            # can the request belong to an active session (the key contains the principal).
            # Remembered: the fast path has just looked for the same key when it stepped
            # aside, and a waiting client's next poll looks again.
            key = self._keys.key(
                request.principal, request.object_id, download_id, request.client_address
            )
        if key is None or (not sessions and key not in self._active):
            # R-STRAT-4: after a switch to shared (or a raised threshold) new work goes
            # per request, but an active session keeps its slot until it ends.
            return self._requests.admit(request.principal, cls, request.effective_range)
        session = self._sessions.get(key)
        byte_range = request.effective_range
        if session is None:
            return self._admit_new(request, key, cls, download_id is not None, byte_range, now)
        if session.state is _ACTIVE:
            if session.yield_requested and session.has_id and not self._closed:
                self._requeue_yielded(session, now)
                return self._queued(session, now, newcomer=False)
            if session.in_flight >= self._settings.ranges_per_session:
                return self._reject(RejectReason.RANGES_PER_SESSION, 1, session.base_class)
            return self._admit_range(session, byte_range, now)
        if self._closed:
            return self._reject(RejectReason.SHUTTING_DOWN, SHUTDOWN_RETRY_SECONDS, cls)
        if session.state is _PAUSED:
            self._resume_paused(session, now)
            if self._may_start_without_queue(session):
                self._activate(session, now)
                return self._admit_range(session, byte_range, now)
            return self._queued(session, now, newcomer=False)
        # WAITING: the client came back.
        if self._may_take_marked_slot(session, now):
            self._activate(session, now)
            return self._admit_range(session, byte_range, now)
        return self._queued(session, now, newcomer=False)

    def _holds_slot(self, principal: str) -> bool:
        """Whether ``principal`` has an active session (a dictionary lookup, no hashing)."""
        if not self._active:
            return False
        record = self._principals.get(principal)
        return record is not None and record.active > 0

    def admit_now(
        self,
        principal: str,
        principal_kind: PrincipalKind,
        base_class: DownloadClass | None,
        requested_class: str | None,
        download_id: str | None,
        object_id: str,
        object_size: int,
        client_address: str,
        byte_range: ByteRange | None,
    ) -> GrantState | None:
        """Grant at once what :meth:`admit` would grant without a queue; else ``None``.

        The fast path of the two most common requests (ADR 0013), with :meth:`admit`'s
        checks in :meth:`admit`'s order, for the outcomes that need no queue:

        - a small object (per request) that does not belong to an active session (its
          key is hashed only when its principal holds a slot), while a place is free:
          a place (``session`` is ``None``), given back by :meth:`release_per_request`;
        - a further range of a download session that holds its slot, is not asked to
          yield it and has a range place free: the range, its ticket in ``ticket``,
          ended by :meth:`report_state`.

        Every other case returns ``None`` and the caller asks :meth:`admit`, which then
        decides exactly as it always does. Raises :class:`InvalidRequestError` as
        :meth:`admit` does, except for a session-sized object whose session is not
        stored: that request is :meth:`admit`'s to validate (an invalid id never has a
        session, so its range steps aside and :meth:`admit` refuses it). Each grant is
        ended exactly once.
        """
        if self._closed:
            return None  # admit answers shutting down, or lets an active session finish
        if base_class is None:
            base_class = default_class(principal_kind)
        if uses_sessions(self._settings, object_size):
            session = self._sessions.get(
                self._keys.key(principal, object_id, download_id, client_address)
            )
            if session is None:
                return None  # admit validates the request and decides
            # A stored session's id was valid when it was created (the key covers the
            # id), so only the requested class is left to check, as admit would.
            if requested_class is not None:
                applied_class(base_class, requested_class)
            return self._further_range_now(session, object_size, byte_range)
        if download_id is not None:
            validated_download_id(download_id)
        cls = base_class if requested_class is None else applied_class(base_class, requested_class)
        if self._active and self._holds_slot(principal):
            key = session_key(principal, object_id, download_id, client_address)
            if key in self._active:
                return None  # R-STRAT-4: a range of an active session; admit serves it
        return self._requests.take_now(cls, byte_range)

    def _further_range_now(
        self, session: Session, object_size: int, byte_range: ByteRange | None
    ) -> GrantState | None:
        if (
            session.state is not _ACTIVE
            or (session.yield_requested and session.has_id)
            or session.in_flight >= self._settings.ranges_per_session
        ):
            return None
        if byte_range is None and object_size:
            byte_range = ByteRange.whole(object_size)  # as DownloadRequest.effective_range
        now = self._clock.monotonic()
        state = self._take_range(session, byte_range, now)
        state.ticket = self._active_ticket(session, now)
        return state

    def _admit_new(
        self,
        request: DownloadRequest,
        key: bytes,
        cls: DownloadClass,
        has_id: bool,
        byte_range: ByteRange | None,
        now: float,
    ) -> Decision:
        settings = self._settings
        if self._closed:
            return self._reject(RejectReason.SHUTTING_DOWN, SHUTDOWN_RETRY_SECONDS, cls)
        if len(self._sessions) >= settings.queue_limit:
            return self._reject(RejectReason.QUEUE_FULL, self._busy_retry_after(), cls)
        principal = self._principals.get(request.principal)
        if principal is not None and principal.sessions >= settings.queue_per_principal:
            return self._reject(RejectReason.PRINCIPAL_LIMIT, self._busy_retry_after(), cls)
        if principal is None:
            principal = PrincipalRecord(request.principal)
            self._principals[request.principal] = principal
        now_wall_ms = int(self._clock.wall() * 1000)
        arrival_wall_ms = now_wall_ms
        arrival = now
        if self._signer is not None and request.ticket:
            signed = self._signer.verify(request.ticket, key, now_wall_ms)
            if signed is not None and signed <= now_wall_ms:
                arrival_wall_ms = signed
                arrival = now - (now_wall_ms - signed) / 1000.0
        self._seq += 1
        session = Session(
            key=key,
            principal=principal,
            object_size=request.object_size,
            base_class=cls,
            has_id=has_id,
            arrival=arrival,
            arrival_wall_ms=arrival_wall_ms,
            seq=self._seq,
        )
        self._sessions[key] = session
        principal.sessions += 1
        start_now = not self._queue and self._slot_free_for(session)
        self._enqueue(session, now)
        if start_now:
            self._activate(session, now)
            return self._admit_range(session, byte_range, now)
        return self._queued(session, now, newcomer=True)

    def _admit_range(self, session: Session, byte_range: ByteRange | None, now: float) -> Admitted:
        state = self._take_range(session, byte_range, now)
        grant = Grant(state.token, "session", session.base_class, byte_range, session.key)
        return Admitted(grant, self._active_ticket(session, now))

    def _take_range(self, session: Session, byte_range: ByteRange | None, now: float) -> GrantState:
        session.in_flight += 1
        session.interrupted = False
        session.last_activity = now
        self._next_token += 1
        token = self._next_token
        state = GrantState(
            token,
            session,
            byte_range,
            now,
            now,
            download_class=session.base_class,
        )
        self._grants[token] = state
        self._counters.admitted += 1
        return state

    def grant_per_request(self, cls: DownloadClass, byte_range: ByteRange | None) -> Admitted:
        """Issue a grant for a per-request place already counted as taken."""
        return self._requests.grant(cls, byte_range)

    def cancel_pending(self, pending: PendingRequest) -> Rejected | None:
        """The wait for a per-request place ran out. None if it was promoted meanwhile."""
        return self._requests.cancel(pending)

    # ================================================================ delivery
    def report(self, grant: Grant, outcome: DeliveryOutcome) -> list[int]:
        """Record how a response ended. Returns per-request waiters promoted into places."""
        if grant.admission == "per-request":
            return self._requests.report(grant, outcome)
        state = self._grants.get(grant.token)
        if state is None:
            return []
        return self.report_state(state, outcome)

    def report_state(self, state: GrantState, outcome: DeliveryOutcome) -> list[int]:
        """:meth:`report` for a range of :meth:`admit_now` (any grant state); a second
        call is a no-op."""
        session = state.session
        if session is None:
            return self._requests.report_state(state, outcome)
        if self._grants.pop(state.token, None) is None:
            return []
        now = self._clock.monotonic()
        if isinstance(outcome, Delivered):
            counted = outcome.byte_range or state.byte_range
            sent = counted.length if counted is not None else 0
        else:
            counted = None
            sent = outcome.bytes_sent
        self._record_bytes(state, max(0, sent - state.progressed), now)
        session.in_flight = max(0, session.in_flight - 1)
        if counted is None and not session.in_flight:
            # Cancelled or failed with nothing else in flight: hold the slot only as
            # long as a tail read, so a client that gave up does not idle it for 30 s.
            session.interrupted = True
        session.last_activity = now
        if counted is not None:
            # Judged when the range arrives, after the ranges before it: a dropped first
            # request must not pin the start below where a resuming client continues,
            # and a read walking back from the tail may be admitted before the read it
            # follows is reported (R-SESS-8).
            delivered = session.delivered
            last = None if delivered is None else delivered.last()
            if sets_start(state.byte_range, session.object_size, last):
                known = session.start_offset
                offset = counted.start
                session.start_offset = offset if known is None else min(known, offset)
            if session.delivered is None:
                session.delivered = DeliveredRanges()
            session.delivered.add(counted.start, counted.end)
        if session.state is not _GONE and session.is_complete():
            self._complete(session)
        return []

    def release_per_request(self, state: GrantState, sent: int) -> list[int]:
        """Give back a place of :meth:`admit_now` after ``sent`` bytes.

        What :meth:`report` does for a per-request grant: ``sent`` is the byte count
        a ``Delivered`` outcome stands for (the whole object, or the granted range), or
        the bytes sent before an interruption or failure. A second call is a no-op.
        Returns the per-request waiters promoted into the freed place.
        """
        return self._requests.release(state, sent)

    def progress(self, grant: Grant, nbytes: int) -> None:
        if grant.admission == "per-request":
            self._requests.progress(grant, nbytes)
            return
        state = self._grants.get(grant.token)
        if state is not None:
            self.progress_per_request(state, nbytes)

    def progress_per_request(self, state: GrantState, nbytes: int) -> None:
        """:meth:`progress` for a place or range of :meth:`admit_now` (or any grant state)."""
        if state.session is None:
            self._requests.progress_state(state, nbytes)
            return
        if nbytes <= 0 or state.token not in self._grants:
            return
        now = self._clock.monotonic()
        self._record_bytes(state, nbytes, now)
        state.progressed += nbytes
        if state.session is not None:
            state.session.last_activity = now

    def _record_bytes(self, state: GrantState, nbytes: int, now: float) -> None:
        if nbytes <= 0:
            return
        self._rate.record(state.last_progress, now, nbytes)
        state.last_progress = now
        self._bytes_by_class[state.download_class.rank] += nbytes

    # ================================================================ tick
    def tick(self) -> TickOutcome:
        """Expire, release idle slots, age, preempt, mark; see module rules."""
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
        scanned = 0
        for session in self._queue.iter_fair():
            scanned += 1
            if scanned > MARK_SCAN_SLACK:
                return None
            if self._blocked(session) or self._over_share_with_contenders(session):
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
        marks = choose_marks(
            queue.heads(), queue.passes, queue.strides, budget, self._may_be_marked
        )
        epoch = self._mark_epoch
        for entry, backup in marks:
            session = entry[3]
            session.mark = epoch
            session.mark_backup = backup
        return len(marks)

    def _may_be_marked(self, entry: tuple[float, float, int, Session]) -> bool:
        session = entry[3]
        return not (self._blocked(session) or self._over_share_with_contenders(session))

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
        )

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
        if principal.sessions == 0:
            del self._principals[principal.name]

    # ================================================================ estimates
    def _current_rate(self) -> float:
        peak = self._rate.peak(self._clock.monotonic())
        if peak > 0:
            self._last_rate = peak
        return estimate_rate(peak, self._last_rate, self._settings.bandwidth)

    def _refresh_finish_table(self, now: float) -> None:
        """When each slot frees, from the remaining bytes of active sessions (R-EST-1)."""
        per_session_rate = self._current_rate() / max(1, len(self._active))
        self._finish_table = finish_table(
            (session.remaining_bytes() for session in self._active.values()),
            per_session_rate,
            now,
            self._settings.sessions,
        )
        self._finish_table_at = now

    def _estimate_start(self, session: Session, ahead: int, now: float) -> float:
        settings = self._settings
        if now - self._finish_table_at > 1.0:
            self._refresh_finish_table(now)
        return estimate_start(
            self._finish_table,
            ahead=ahead,
            now=now,
            sessions=settings.sessions,
            reserve=settings.reserve,
            interactive=session.interactive,
            active=len(self._active),
            active_interactive=self._active_interactive,
            waiting=len(self._queue),
            waiting_bytes=self._waiting_bytes,
            rate=self._current_rate(),
        )

    def _queued(self, session: Session, now: float, *, newcomer: bool) -> Queued:
        ahead = self._queue.ahead_of(session)
        start = self._estimate_start(session, ahead, now)
        wait = start - now
        delay = check_delay(
            session.key,
            newcomer=newcomer,
            ahead=ahead,
            wait=wait,
            marked=session.mark == self._mark_epoch,
            free_at_mark=self._free_at_mark,
        )
        if not newcomer and session.first_estimate is None and session.blocked_by is None:
            session.first_estimate = start
            session.first_estimate_at = now
        session.check_at = now + delay
        session.no_show_at = no_show_at(session.check_at, delay)
        self._deadlines.schedule(session, session.no_show_at)
        earliest, latest = estimate_interval(start, now)
        wall_offset = self._clock.wall() - now
        return Queued(
            position=None if newcomer else ahead + 1,
            starts_at=start + wall_offset,
            starts_earliest=earliest + wall_offset,
            starts_latest=latest + wall_offset,
            check_at=session.check_at + wall_offset,
            retry_after=max(1, math.ceil(delay)),
            download_class=session.base_class,
            ticket=self._issue_ticket(session),
        )

    def _active_ticket(self, session: Session, now: float) -> str | None:
        """The ticket for a range of an active session, signed at most once a minute.

        A ticket is accepted for 15 minutes, so one signed a minute ago is as good as a
        fresh one; re-signing on every 8 MiB range would double the cost of admitting it.
        """
        cached = session.ticket
        if cached is not None and now - session.ticket_issued < TICKET_REUSE_SECONDS:
            return cached
        ticket = self._issue_ticket(session)
        session.ticket = ticket
        session.ticket_issued = now
        return ticket

    def _issue_ticket(self, session: Session) -> str | None:
        if self._signer is None:
            return None
        now_ms = max(int(self._clock.wall() * 1000), session.arrival_wall_ms)
        return self._signer.issue(session.key, session.arrival_wall_ms, now_ms)

    def _busy_retry_after(self) -> int:
        """An honest wait for a full queue: until about one slot turns over."""
        return busy_retry_after(self._waiting_bytes, len(self._queue), self._current_rate())

    def _reject(
        self, reason: RejectReason, retry_after: int, cls: DownloadClass | None
    ) -> Rejected:
        rejections = self._counters.rejections
        rejections[reason] = rejections.get(reason, 0) + 1
        return Rejected(reason, retry_after, cls)

    # ================================================================ control
    def configure(self, settings: SchedulerSettings) -> None:
        """Apply from the next decision on; env-only fields keep their start-up values."""
        settings = settings.keeping_environment_only(self._settings)
        self._settings = settings
        self._queue.reconfigure(settings.strategy, settings.weights, settings.aging_minutes * 60)
        self._under_share_waiting = sum(
            principal.waiting
            for principal in self._principals.values()
            if principal.active < settings.per_principal
        )
        stop = not settings.preempt or settings.strategy is _SHARED
        if stop and self._pending_yield is not None:
            self._pending_yield.yield_requested = False
            self._pending_yield.blocked_by = None
            self._pending_yield = None
        self._mark_epoch += 1

    def close(self) -> list[int]:
        """Stop admitting new work; returns per-request waiters to wake with a refusal."""
        self._closed = True
        return self._requests.close()

    # ================================================================ stats
    def stats(self) -> SchedulerStats:
        now = self._clock.monotonic()
        per_class: dict[DownloadClass, ClassStats] = {}
        for rank in range(CLASS_COUNT):
            cls = DownloadClass.by_rank(rank)
            oldest = self._queue.oldest_waiting_since(rank)
            per_class[cls] = ClassStats(
                waiting=self._by_class_waiting[rank],
                active=self._by_class_active[rank],
                paused=self._by_class_paused[rank],
                oldest_wait_seconds=0.0 if oldest is None else max(0.0, now - oldest),
                bytes_delivered=self._bytes_by_class[rank],
                wait_seconds=self._wait_histograms[rank].snapshot(),
            )
        empty_in: float | None = None
        if self._queue:
            rate = self._current_rate()
            active_bytes = sum(session.remaining_bytes() for session in self._active.values())
            empty_in = (self._waiting_bytes + active_bytes) / rate
        settings = self._settings
        return SchedulerStats(
            strategy=settings.strategy.value,
            admission="per-request" if settings.strategy is _SHARED else "session",
            sessions_limit=settings.sessions,
            per_class=per_class,
            request_active=self._requests.active,
            request_waiting=self._requests.waiting,
            admitted_total=self._counters.admitted + self._requests.admitted,
            completed_total=self._counters.completed,
            no_shows_total=self._counters.no_shows,
            idle_releases_total=self._counters.idle_releases,
            preemptions_total=self._counters.preemptions,
            rejections_total=_merged(self._counters.rejections, self._requests.rejections),
            estimate_error_seconds=self._estimates.absolute().snapshot(),
            estimate_accuracy=self._estimates.accuracy(),
            last_tick_seconds=self._last_tick_seconds,
            delivery_rate=self._current_rate(),
            queue_empty_in_seconds=empty_in,
            closed=self._closed,
        )

    def estimate_error(self) -> HistogramSnapshot:
        return self._estimates.absolute().snapshot()

    # ================================================================ introspection
    def debug_invariants(self) -> list[str]:
        """Structural checks for tests; O(n). Returns the violated invariants."""
        problems: list[str] = []
        states = [s.state for s in self._sessions.values()]
        if states.count(_ACTIVE) != len(self._active):
            problems.append("active index out of sync")
        if states.count(_WAITING) != len(self._queue):
            problems.append("waiting index out of sync")
        if sum(self._by_class_waiting) != len(self._queue):
            problems.append("per-class waiting counters out of sync")
        if sum(self._by_class_active) != len(self._active):
            problems.append("per-class active counters out of sync")
        if sum(self._by_class_paused) != states.count(_PAUSED):
            problems.append("per-class paused counters out of sync")
        interactive = sum(1 for s in self._active.values() if s.interactive)
        if interactive != self._active_interactive:
            problems.append("interactive counter out of sync")
        share = self._settings.per_principal
        expected_under = sum(p.waiting for p in self._principals.values() if p.active < share)
        if expected_under != self._under_share_waiting:
            problems.append("under-share waiting counter out of sync")
        for principal in self._principals.values():
            owned = [s for s in self._sessions.values() if s.principal is principal]
            if len(owned) != principal.sessions:
                problems.append(f"principal session count out of sync ({principal.sessions})")
            if sum(s.state is _WAITING for s in owned) != principal.waiting:
                problems.append("principal waiting count out of sync")
            if sum(s.state is _ACTIVE for s in owned) != principal.active:
                problems.append("principal active count out of sync")
        for session in self._sessions.values():
            if session.delivered is not None:
                spans = session.delivered.intervals()
                if len(spans) > 64:
                    problems.append("more than 64 delivered intervals")
                for (_, end), (start, _) in itertools.pairwise(spans):
                    if start <= end:
                        problems.append("delivered intervals overlap or touch")
        return problems

    def grants_in_flight(self) -> int:
        return len(self._grants) + self._requests.in_flight

    def principal_active(self, principal: str) -> int:
        record = self._principals.get(principal)
        return 0 if record is None else record.active

    def contenders_waiting(self) -> int:
        return self._under_share_waiting

    def active_noninteractive(self) -> int:
        return len(self._active) - self._active_interactive


def _merged(
    first: dict[RejectReason, int], second: dict[RejectReason, int]
) -> dict[RejectReason, int]:
    """The rejection counts of the session path and of the per-request places, added up."""
    merged = dict(first)
    for reason, count in second.items():
        merged[reason] = merged.get(reason, 0) + count
    return merged
