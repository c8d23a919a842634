"""The answers a waiting or refused client gets: estimates, ``Queued``, tickets."""

from __future__ import annotations

import math

from .._classes import DownloadClass
from .._model import (
    Queued,
    Rejected,
    RejectReason,
)
from ..policy import (
    TICKET_REUSE_SECONDS,
    busy_retry_after,
    check_delay,
    estimate_interval,
    estimate_rate,
    estimate_start,
    finish_table,
    no_show_at,
)
from ._core_transitions import CoreTransitions
from ._session import Session

__all__ = ["CoreEstimates"]


class CoreEstimates(CoreTransitions):
    """Delivery rate, start estimates, the ``Queued`` answer, tickets and refusals."""

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
