"""``queue_state()`` of :class:`PostgresScheduler`: the statistics plus two cheap reads.

The active sessions are at most ``sessions`` slot rows, and the first waiter of each
lane is one probe of the place index; the waiting bytes per class come with the tallies
``stats()`` reads anyway. Nothing here scans the waiting sessions (R-RES-2), so an
operator watching the queue page costs the database the same at a million waiting.

Every process of a fleet answers for the whole shared queue. The wait and estimate
histograms inside ``stats`` are this process's own (the starts it granted).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._classes import DownloadClass
from .._exceptions import ArkvoryError
from .._queue_state import ActiveSession, ClassQueue, QueueState
from ..policy import CLASS_COUNT
from . import _sql as sql
from ._scheduler_state import _WAITING, DATABASE_ERRORS

if TYPE_CHECKING:
    from ._scheduler import PostgresScheduler

__all__ = ["read_queue_state"]


async def read_queue_state(scheduler: PostgresScheduler) -> QueueState:
    """The operator's view of the shared queue now (see :class:`QueueState`).

    Raises :class:`ArkvoryError` when the database cannot be read: an operator must
    not be shown an empty queue that is only an unreachable one.
    """
    stats = await scheduler.stats()
    clock = scheduler._clock
    per_principal = scheduler.settings.per_principal
    try:
        async with scheduler._acquire() as conn:
            tallies = await conn.fetch(sql.STATS)
            active_rows = await conn.fetch(sql.QUEUE_STATE_ACTIVE)
            heads = await conn.fetch(sql.QUEUE_STATE_HEADS)
            held = {
                row["principal"]: int(row["count"])
                for row in await conn.fetch(sql.ACTIVE_BY_PRINCIPAL)
            }
            over = [name for name, count in held.items() if count >= per_principal]
            contenders = bool(over) and bool(await conn.fetchval(sql.UNDER_SHARE_WAITING, over))
    except DATABASE_ERRORS as error:
        scheduler._trouble(error)
        raise ArkvoryError(f"the shared queue cannot be read right now: {error}") from error
    now = clock.monotonic()
    wall = clock.wall()
    waiting_bytes = [0] * CLASS_COUNT
    for row in tallies:
        if row["state"] == _WAITING:
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
            head_at_share=head is not None and contenders and held.get(head, 0) >= per_principal,
        )
    sessions.sort(key=lambda item: item.since)
    return QueueState(at=wall, stats=stats, per_class=per_class, active_sessions=tuple(sessions))
