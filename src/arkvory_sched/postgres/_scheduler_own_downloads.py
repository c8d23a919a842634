"""``downloads_of()`` of :class:`PostgresScheduler`: one principal's sessions, two reads.

One statement (``own_downloads``) finds the principal's sessions through the index on
the principal and counts each shown waiter's place the way a poll does (ADR 0020); the
estimate inputs are the same half-second snapshot of the leader's tick that polls use.
So a waiter sees on the page what its client's next poll will be told, and the cost is
bounded by the principal's own sessions, never by the queue (issue #19, ADR 0025).

Rows admitted before migration 0011 have no object or download id stored; they show
an empty object id until they are gone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import asyncpg

from .._classes import DownloadClass
from .._exceptions import ArkvoryError
from .._own_downloads import OWN_DOWNLOADS_LIMIT, DownloadState, OwnDownload, OwnDownloads
from ..policy import PAUSE_RETENTION_SECONDS
from . import _sql as sql
from ._estimates import QueueSnapshot
from ._leader import exact_head
from ._scheduler_state import _ACTIVE, _PAUSED, _WAITING, DATABASE_ERRORS

if TYPE_CHECKING:
    from ._scheduler import PostgresScheduler

__all__ = ["read_downloads_of"]


async def read_downloads_of(
    scheduler: PostgresScheduler, principal: str, limit: int = OWN_DOWNLOADS_LIMIT
) -> OwnDownloads:
    """The downloads of ``principal`` in the shared queue now (see :class:`OwnDownloads`).

    Raises :class:`ArkvoryError` when the database cannot be read: "no downloads" would
    be a false answer.
    """
    limit = max(1, min(limit, OWN_DOWNLOADS_LIMIT))
    try:
        async with scheduler._acquire() as conn:
            rows = await conn.fetch(
                sql.OWN_DOWNLOADS, principal, exact_head(scheduler.settings.sessions), limit
            )
            snapshot = await scheduler._queue_snapshot(conn) if rows else None
    except DATABASE_ERRORS as error:
        scheduler._trouble(error)
        raise ArkvoryError(f"the shared queue cannot be read right now: {error}") from error
    clock = scheduler._clock
    now = clock.monotonic()
    wall = clock.wall()
    shown = tuple(
        described
        for row in rows
        if (described := _describe(scheduler, row, snapshot, now, wall)) is not None
    )
    total = int(rows[0]["total"]) if rows else 0
    return OwnDownloads(principal=principal, at=wall, downloads=shown, total=total)


def _describe(
    scheduler: PostgresScheduler,
    row: asyncpg.Record,
    snapshot: QueueSnapshot | None,
    now: float,
    wall: float,
) -> OwnDownload | None:
    base = DownloadClass.by_rank(row["base_class"])
    covered = int(row["covered"])
    size = int(row["object_size"])
    left = max(0, size - (row["start_offset"] or 0) - covered)
    position: int | None = None
    starts_at = earliest = latest = rate = None
    if row["state"] == _WAITING and snapshot is not None:
        state = DownloadState.WAITING
        estimate = scheduler._estimate(row["own_ahead"], row["queue_rank"], base, snapshot, now)
        offset = estimate.wall_offset
        position = estimate.ahead + 1
        starts_at = estimate.start + offset
        earliest = estimate.earliest + offset
        latest = estimate.latest + offset
        since = wall - max(0.0, now - row["waiting_since"])
    elif row["state"] == _ACTIVE:
        state = DownloadState.ACTIVE
        held = max(0.0, now - (row["slot_since"] or now))
        rate = covered / held if held > 0 else 0.0
        since = wall - held
    elif row["state"] == _PAUSED:
        state = DownloadState.PAUSED
        paused_at = (row["paused_until"] or now) - PAUSE_RETENTION_SECONDS
        since = wall - max(0.0, now - paused_at)
    else:
        return None
    return OwnDownload(
        object_id=row["object_id"] or "",
        download_id=row["download_id"],
        state=state,
        download_class=base,
        queue_class=DownloadClass.by_rank(row["queue_rank"]),
        position=position,
        starts_at=starts_at,
        starts_earliest=earliest,
        starts_latest=latest,
        object_size=size,
        bytes_delivered=covered,
        bytes_remaining=left,
        rate=rate,
        since=since,
    )
