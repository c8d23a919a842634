"""``queue_state()`` of :class:`PostgresScheduler`: the statistics plus two cheap reads.

The active sessions are at most ``sessions`` slot rows, and the first waiter of each
lane is one probe of the place index; the waiting bytes per class come with the tallies
``stats()`` reads anyway. Nothing here scans the waiting sessions (R-RES-2), so an
operator watching the queue page costs the database the same at a million waiting.

Every process of a fleet answers for the whole shared queue. The wait and estimate
histograms inside ``stats`` are this process's own (the starts it granted).
"""

from __future__ import annotations

from .._classes import DownloadClass
from .._clock import Clock
from .._exceptions import StoreUnavailableError
from .._queue_state import ActiveSession, ClassQueue, QueueState
from ..policy import CLASS_COUNT
from . import _sql as sql
from ._boundary import Connections
from ._running import Running
from ._stats import Statistics

__all__ = ["QueueStateReader"]


class QueueStateReader:
    """``queue_state()`` of :class:`PostgresScheduler`."""

    def __init__(
        self, running: Running, connections: Connections, statistics: Statistics, clock: Clock
    ) -> None:
        self._running = running
        self._connections = connections
        self._statistics = statistics
        self._clock = clock

    async def read(self) -> QueueState:
        """The operator's view of the shared queue now (see :class:`QueueState`).

        Raises :class:`StoreUnavailableError` when the database cannot be read: an
        operator must not be shown an empty queue that is only an unreachable one.
        """
        stats = await self._statistics.stats()
        per_principal = self._running.settings.per_principal
        try:
            async with self._connections.acquire() as conn:
                tallies = await conn.fetch(sql.STATS)
                active_rows = await conn.fetch(sql.QUEUE_STATE_ACTIVE)
                heads = await conn.fetch(sql.QUEUE_STATE_HEADS)
                held = {
                    row["principal"]: int(row["count"])
                    for row in await conn.fetch(sql.ACTIVE_BY_PRINCIPAL)
                }
                over = [name for name, count in held.items() if count >= per_principal]
                contenders = bool(over) and bool(await conn.fetchval(sql.UNDER_SHARE_WAITING, over))
        except StoreUnavailableError as error:
            self._connections.trouble(error)
            raise
        now = self._clock.monotonic()
        wall = self._clock.wall()
        waiting_bytes = [0] * CLASS_COUNT
        for row in tallies:
            if row["state"] == sql.WAITING:
                waiting_bytes[row["base_class"]] = max(0, round(row["bytes"]))
        remaining = [0] * CLASS_COUNT
        sessions: list[ActiveSession] = []
        for row in active_rows:
            start = row["start_offset"] or 0
            covered = int(row["covered"])
            left = max(0, row["object_size"] - start - covered)
            remaining[row["base_class"]] += left
            held_for = max(0.0, now - (row["slot_since"] or now))
            sessions.append(
                ActiveSession(
                    principal=row["principal"],
                    download_class=DownloadClass.by_rank(row["base_class"]),
                    since=wall - held_for,
                    bytes_delivered=covered,
                    bytes_remaining=left,
                    rate=covered / held_for if held_for > 0 else 0.0,
                )
            )
        head_of = {row["queue_rank"]: row["principal"] for row in heads}
        per_class: dict[DownloadClass, ClassQueue] = {}
        for rank in range(CLASS_COUNT):
            head = head_of.get(rank)
            per_class[DownloadClass.by_rank(rank)] = ClassQueue(
                waiting_bytes=waiting_bytes[rank],
                remaining_bytes=remaining[rank],
                head_at_share=head is not None
                and contenders
                and held.get(head, 0) >= per_principal,
            )
        sessions.sort(key=lambda item: item.since)
        return QueueState(
            at=wall, stats=stats, per_class=per_class, active_sessions=tuple(sessions)
        )
