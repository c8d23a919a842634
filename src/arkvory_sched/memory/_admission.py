"""Admitting a GET: a new session, a further range, a returning waiter, a resumption.

:meth:`Admission.admit` decides every request; :meth:`Admission.admit_now` is its fast
path for the two most common ones (ADR 0013). Small objects and the ``shared`` strategy
go to the per-request places (:class:`RequestAdmission`); everything else is a session
of the :class:`SessionTable`, started when :class:`Slots` finds a slot free for it and
otherwise answered by :class:`Answers`. The admission owns the grants' tokens, the
sessions' sequence numbers and the remembered session keys.
"""

from __future__ import annotations

from .._classes import DownloadClass, PrincipalKind
from .._clock import Clock
from .._early_polls import EarlyPolls
from .._grant_state import GrantState
from .._model import (
    Admitted,
    ByteRange,
    Decision,
    DownloadRequest,
    Grant,
    RejectReason,
)
from .._request_admission import PendingRequest, RequestAdmission
from .._session_keys import SessionKeys, session_key
from .._tickets import TicketSigner
from ..policy import (
    SHUTDOWN_RETRY_SECONDS,
    plan_of,
    plan_request,
    ticket_arrival,
    uses_sessions,
)
from ..settings import SchedulerSettings
from ._answers import Answers
from ._counters import Counters
from ._session import ACTIVE, PAUSED, Session
from ._slots import Slots
from ._table import SessionTable

__all__ = ["Admission"]


class Admission:
    """The admission path of the in-memory store (``admit`` and its fast path).

    ``grants`` is the store's map of session grants in flight, shared with delivery,
    which ends them. The hot structures of the table (sessions, principals, the active
    map) are held here directly: the fast path reads them with one attribute hop.
    """

    __slots__ = ("_active", "_answers", "_clock", "_counters", "_early", "_grants",
                 "_next_token", "_principals", "_requests", "_rules", "_seq", "_sessions",
                 "_signer", "_slots", "_table", "keys", "settings")  # fmt: skip

    def __init__(
        self,
        settings: SchedulerSettings,
        clock: Clock,
        signer: TicketSigner | None,
        *,
        table: SessionTable,
        slots: Slots,
        answers: Answers,
        requests: RequestAdmission,
        early: EarlyPolls,
        grants: dict[int, GrantState[Session]],
        counters: Counters,
    ) -> None:
        self.settings = settings
        self._rules = settings.admission_rules
        self._clock = clock
        self._signer = signer
        self._table = table
        self._sessions = table.sessions
        self._principals = table.principals
        self._active = table.active
        self._slots = slots
        self._answers = answers
        self._requests = requests
        self._early = early
        self._grants = grants
        self._counters = counters
        self.keys = SessionKeys()  # the remembered session keys, a bounded cache
        self._next_token = 0
        self._seq = 0

    def configure(self, settings: SchedulerSettings) -> None:
        """Plan and decide by ``settings`` from the next request on."""
        self.settings = settings
        self._rules = settings.admission_rules

    # ================================================================ admission
    def admit(self, request: DownloadRequest) -> Decision | PendingRequest:
        """Decide one GET (see ``DownloadScheduler.admit``); never blocks."""
        table, slots, answers = self._table, self._slots, self._answers
        now = self._clock.monotonic()
        download_id, _, cls, sessions = plan_of(self._rules, request)
        key: bytes | None = None
        if sessions or self._holds_slot(request.principal):
            # A small object hashes no key unless its principal holds a slot: only then
            # can the request belong to an active session (the key contains the principal).
            # Remembered: the fast path has just looked for the same key when it stepped
            # aside, and a waiting client's next poll looks again.
            key = self.keys.key(
                request.principal, request.object_id, download_id, request.client_address
            )
        if key is None or (not sessions and key not in self._active):
            # R-STRAT-4: after a switch to shared (or a raised threshold) new work goes
            # per request, but an active session keeps its slot until it ends.
            return self._requests.admit(request.principal, cls, request.effective_range)
        session = self._sessions.get(key)
        byte_range = request.effective_range
        if session is None:
            return self._admit_new(request, key, cls, download_id, byte_range, now)
        if session.state is ACTIVE:
            if session.yield_requested and session.has_id and not table.closed:
                table.requeue_yielded(session, now)
                return answers.queued(session, now, newcomer=False, again=True)
            if session.in_flight >= self.settings.ranges_per_session:
                return answers.reject(RejectReason.RANGES_PER_SESSION, 1, session.base_class)
            return self._admit_range(session, byte_range, now)
        if table.closed:
            return answers.reject(RejectReason.SHUTTING_DOWN, SHUTDOWN_RETRY_SECONDS, cls)
        if session.state is PAUSED:
            table.resume_paused(session, now)
            if slots.may_start_without_queue(session):
                table.activate(session, now)
                return self._admit_range(session, byte_range, now)
            return answers.queued(session, now, newcomer=False, again=True)
        # WAITING: the client came back. Unless marked while a slot is free, well
        # before its checkAt it is told the same again, as the shared store must
        # without a statement (ADR 0029).
        if slots.may_take_marked_slot(session, now, answers.next_slot_free):
            table.activate(session, now)
            return self._admit_range(session, byte_range, now)
        marked = session.mark == table.mark_epoch
        if download_id is not None and not (marked and len(self._active) < self.settings.sessions):
            early = self._early.answer(key, request.ticket, now, self._clock.wall() - now)
            if early is not None:
                return early
        return answers.queued(session, now, newcomer=False)

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
    ) -> GrantState[Session] | None:
        """Grant at once what :meth:`admit` would grant without a queue; else ``None``.

        The fast path of the two most common requests (ADR 0013), with :meth:`admit`'s
        checks in :meth:`admit`'s order, for the outcomes that need no queue:

        - a small object (per request) that does not belong to an active session (its
          key is hashed only when its principal holds a slot), while a place is free:
          a place (``session`` is ``None``), given back by ``release_per_request``;
        - a further range of a download session that holds its slot, is not asked to
          yield it and has a range place free: the range, its ticket in ``ticket``,
          ended by ``Delivery.report_state``.

        Every other case returns ``None`` and the caller asks :meth:`admit`, which then
        decides exactly as it always does. Raises :class:`InvalidRequestError` as
        :meth:`admit` does, except for a session-sized object whose session is not
        stored: that request is :meth:`admit`'s to validate (an invalid id never has a
        session, so its range steps aside and :meth:`admit` refuses it). Each grant is
        ended exactly once.
        """
        if self._table.closed:
            return None  # admit answers shutting down, or lets an active session finish
        rules = self._rules
        if uses_sessions(rules, object_size):
            # A further range looks its session up before any plan (ADR 0013): the plan
            # of a stored session was made when admit created it (its key covers the
            # checked id), so only a requested class is left to check, as admit would.
            session = self._sessions.get(
                self.keys.key(principal, object_id, download_id, client_address)
            )
            if session is None:
                return None  # admit plans the request and decides
            if requested_class is not None:
                plan_request(
                    rules,
                    principal,
                    principal_kind,
                    base_class,
                    requested_class,
                    download_id,
                    object_size,
                )
            return self._further_range_now(session, object_size, byte_range)
        download_id, _, cls, _ = plan_request(
            rules, principal, principal_kind, base_class, requested_class, download_id, object_size
        )
        if self._active and self._holds_slot(principal):
            key = session_key(principal, object_id, download_id, client_address)
            if key in self._active:
                return None  # R-STRAT-4: a range of an active session; admit serves it
        return self._requests.take_now(cls, byte_range)

    def _further_range_now(
        self, session: Session, object_size: int, byte_range: ByteRange | None
    ) -> GrantState[Session] | None:
        if (
            session.state is not ACTIVE
            or (session.yield_requested and session.has_id)
            or session.in_flight >= self.settings.ranges_per_session
        ):
            return None
        if byte_range is None and object_size:
            byte_range = ByteRange.whole(object_size)  # as DownloadRequest.effective_range
        now = self._clock.monotonic()
        state = self._take_range(session, byte_range, now)
        state.ticket = self._answers.active_ticket(session, now)
        return state

    def _admit_new(
        self,
        request: DownloadRequest,
        key: bytes,
        cls: DownloadClass,
        download_id: str | None,
        byte_range: ByteRange | None,
        now: float,
    ) -> Decision:
        settings, table, answers = self.settings, self._table, self._answers
        if table.closed:
            return answers.reject(RejectReason.SHUTTING_DOWN, SHUTDOWN_RETRY_SECONDS, cls)
        if len(self._sessions) >= settings.queue_limit:
            return answers.reject(RejectReason.QUEUE_FULL, answers.busy_retry_after(), cls)
        principal = self._principals.get(request.principal)
        if principal is not None and principal.sessions >= settings.queue_per_principal:
            return answers.reject(RejectReason.PRINCIPAL_LIMIT, answers.busy_retry_after(), cls)
        principal = table.principal_record(request.principal)
        now_wall_ms = int(self._clock.wall() * 1000)
        signed: int | None = None
        if self._signer is not None and request.ticket:
            signed = self._signer.verify(request.ticket, key, now_wall_ms)
        arrival, arrival_wall_ms = ticket_arrival(signed, now, now_wall_ms)
        self._seq += 1
        session = Session(
            key=key,
            principal=principal,
            object_size=request.object_size,
            base_class=cls,
            has_id=download_id is not None,
            arrival=arrival,
            arrival_wall_ms=arrival_wall_ms,
            seq=self._seq,
            object_id=request.object_id,
            download_id=download_id,
        )
        session.note_start(byte_range)
        table.add(session)
        start_now = self._slots.newcomer_starts_now(session)
        table.enqueue(session, now)
        if start_now:
            table.activate(session, now)
            return self._admit_range(session, byte_range, now)
        return answers.queued(session, now, newcomer=True)

    def _admit_range(self, session: Session, byte_range: ByteRange | None, now: float) -> Admitted:
        state = self._take_range(session, byte_range, now)
        grant = Grant(state.token, "session", session.base_class, byte_range, session.key)
        return Admitted(grant, self._answers.active_ticket(session, now))

    def _take_range(
        self, session: Session, byte_range: ByteRange | None, now: float
    ) -> GrantState[Session]:
        session.note_start(byte_range)
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
