"""``downloads_of()`` of the in-memory store: one principal's sessions, read in place.

A reader, like :mod:`._queue_state`: it changes nothing a client would notice (the
estimate is the one a poll computes, without the poll's records). The
principal's record keeps its sessions in arrival order, so the cost is the number
shown, each with one place in the fair queue (O(log n)), whatever the queue's length.
"""

from __future__ import annotations

from .._classes import DownloadClass
from .._clock import Clock
from .._own_downloads import OWN_DOWNLOADS_LIMIT, DownloadState, OwnDownload, OwnDownloads
from ..policy import PAUSE_RETENTION_SECONDS
from ._answers import Answers
from ._session import ACTIVE, PAUSED, WAITING, Session
from ._table import SessionTable

__all__ = ["downloads_of"]


def downloads_of(
    table: SessionTable,
    answers: Answers,
    clock: Clock,
    principal: str,
    limit: int = OWN_DOWNLOADS_LIMIT,
) -> OwnDownloads:
    """The downloads of ``principal`` now (see :class:`OwnDownloads`); a waiter's
    estimate is the one its next poll would get from ``answers``."""
    limit = max(1, min(limit, OWN_DOWNLOADS_LIMIT))
    now = clock.monotonic()
    wall = clock.wall()
    record = table.principals.get(principal)
    if record is None:
        return OwnDownloads(principal=principal, at=wall, downloads=(), total=0)
    shown: list[OwnDownload] = []
    for session in record.owned:
        if len(shown) >= limit:
            break
        described = _describe(answers, session, now, wall)
        if described is not None:
            shown.append(described)
    return OwnDownloads(
        principal=principal, at=wall, downloads=tuple(shown), total=len(record.owned)
    )


def _describe(answers: Answers, session: Session, now: float, wall: float) -> OwnDownload | None:
    delivered = session.sent_bytes()  # with what responses still running sent
    position: int | None = None
    starts_at = earliest = latest = rate = None
    guessed = False
    if session.state is WAITING:
        state = DownloadState.WAITING
        estimate = answers.estimate(session, now)
        offset = estimate.wall_offset
        position = estimate.ahead + 1
        starts_at = estimate.start + offset
        earliest = estimate.earliest + offset
        latest = estimate.latest + offset
        guessed = not estimate.known  # as its poll is told (ADR 0042)
        since = wall - max(0.0, now - session.waiting_since)
    elif session.state is ACTIVE:
        state = DownloadState.ACTIVE
        held = max(0.0, now - session.slot_since)
        rate = delivered / held if held > 0 else 0.0
        since = wall - held
    elif session.state is PAUSED:
        state = DownloadState.PAUSED
        paused_at = session.paused_until - PAUSE_RETENTION_SECONDS
        since = wall - max(0.0, now - paused_at)
    else:  # gone: never in ``owned``, but a reader must not trust that blindly
        return None
    return OwnDownload(
        object_id=session.object_id,
        download_id=session.download_id,
        state=state,
        download_class=session.base_class,
        queue_class=DownloadClass.by_rank(session.queue_rank),
        position=position,
        starts_at=starts_at,
        starts_earliest=earliest,
        starts_latest=latest,
        object_size=session.object_size,
        bytes_delivered=delivered,
        bytes_remaining=session.remaining_bytes(),
        rate=rate,
        since=since,
        starts_guessed=guessed,
    )
