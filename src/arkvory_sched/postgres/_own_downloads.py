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

import asyncpg

from .._classes import DownloadClass
from .._clock import Clock
from .._exceptions import StoreUnavailableError
from .._own_downloads import OWN_DOWNLOADS_LIMIT, DownloadState, OwnDownload, OwnDownloads
from ..policy import PAUSE_RETENTION_SECONDS, exact_head
from . import _sql as sql
from ._answers import Answers
from ._boundary import Connections
from ._estimates import QueueSnapshot, QueueSnapshots
from ._running import Running

__all__ = ["OwnDownloadsReader"]


class OwnDownloadsReader:
    """``downloads_of()`` of :class:`PostgresScheduler`."""

    def __init__(
        self,
        running: Running,
        connections: Connections,
        answers: Answers,
        snapshots: QueueSnapshots,
        clock: Clock,
    ) -> None:
        self._running = running
        self._connections = connections
        self._answers = answers
        self._snapshots = snapshots
        self._clock = clock

    async def read(self, principal: str, limit: int = OWN_DOWNLOADS_LIMIT) -> OwnDownloads:
        """The downloads of ``principal`` in the shared queue now (see
        :class:`OwnDownloads`).

        Raises :class:`StoreUnavailableError` when the database cannot be read: "no
        downloads" would be a false answer.
        """
        limit = max(1, min(limit, OWN_DOWNLOADS_LIMIT))
        try:
            async with self._connections.acquire() as conn:
                rows = await conn.fetch(
                    sql.OWN_DOWNLOADS, principal, exact_head(self._running.settings.sessions), limit
                )
                snapshot = await self._snapshots.read(conn) if rows else None
        except StoreUnavailableError as error:
            self._connections.trouble(error)
            raise
        now = self._clock.monotonic()
        wall = self._clock.wall()
        shown = tuple(
            described
            for row in rows
            if (described := self._describe(row, snapshot, now, wall)) is not None
        )
        total = int(rows[0]["total"]) if rows else 0
        return OwnDownloads(principal=principal, at=wall, downloads=shown, total=total)

    def _describe(
        self,
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
        guessed = False
        if row["state"] == sql.WAITING and snapshot is not None:
            state = DownloadState.WAITING
            estimate = self._answers.estimate(
                row["own_ahead"], row["queue_rank"], base, snapshot, now, row["seq"], size
            )
            offset = estimate.wall_offset
            position = estimate.ahead + 1
            starts_at = estimate.start + offset
            earliest = estimate.earliest + offset
            latest = estimate.latest + offset
            guessed = not estimate.known  # as its poll is told (ADR 0042)
            since = wall - max(0.0, now - row["waiting_since"])
        elif row["state"] == sql.ACTIVE:
            state = DownloadState.ACTIVE
            held = max(0.0, now - (row["slot_since"] or now))
            rate = covered / held if held > 0 else 0.0
            since = wall - held
        elif row["state"] == sql.PAUSED:
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
            starts_guessed=guessed,
        )
