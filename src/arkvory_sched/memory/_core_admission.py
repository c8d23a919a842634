"""Admitting a GET: a new session, a further range, a returning waiter, a resumption."""

from __future__ import annotations

from .._classes import DownloadClass, PrincipalKind, applied_class
from .._grant_state import GrantState
from .._model import (
    Admitted,
    ByteRange,
    Decision,
    DownloadRequest,
    Grant,
    Rejected,
    RejectReason,
)
from .._request_admission import PendingRequest
from .._session_keys import session_key
from ..policy import (
    SHUTDOWN_RETRY_SECONDS,
    uses_sessions,
    validated_download_id,
)
from ._core_estimates import CoreEstimates
from ._core_state import _ACTIVE, _PAUSED
from ._session import PrincipalRecord, Session

__all__ = ["CoreAdmission"]


class CoreAdmission(CoreEstimates):
    """The admission path of :class:`SchedulerCore` (``admit`` and its fast path)."""

    # ================================================================ admission
    def admit(self, request: DownloadRequest) -> Decision | PendingRequest:
        """Decide one GET (see ``DownloadScheduler.admit``); never blocks."""
        now = self._clock.monotonic()
        download_id = validated_download_id(request.download_id)
        base = self._settings.base_class_of(
            request.principal, request.principal_kind, request.base_class
        )
        cls = applied_class(base, request.requested_class)
        sessions = uses_sessions(self._settings.admission_rules, request.object_size)
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
                return self._queued(session, now, newcomer=False, again=True)
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
            return self._queued(session, now, newcomer=False, again=True)
        # WAITING: the client came back. Unless marked while a slot is free, well
        # before its checkAt it is told the same again, as the shared store must
        # without a statement (ADR 0029).
        if self._may_take_marked_slot(session, now):
            self._activate(session, now)
            return self._admit_range(session, byte_range, now)
        marked = session.mark == self._mark_epoch
        if download_id is not None and not (marked and len(self._active) < self._settings.sessions):
            early = self._early.answer(key, request.ticket, now, self._clock.wall() - now)
            if early is not None:
                return early
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
        base_class = self._settings.base_class_of(principal, principal_kind, base_class)
        if uses_sessions(self._settings.admission_rules, object_size):
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
            object_id=request.object_id,
            download_id=request.download_id if has_id else None,
        )
        self._sessions[key] = session
        principal.sessions += 1
        principal.owned[session] = None
        start_now = self._newcomer_starts_now(session)
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
