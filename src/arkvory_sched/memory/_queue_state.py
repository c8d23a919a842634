"""``queue_state()`` of the in-memory store: read from the session table's live structures.

A reader: it changes nothing and is not on any request path. It reads the per-class
counters, the active sessions (at most ``sessions``) and the first entry of each class's
lane, so it costs the same at a hundred and at a million waiting sessions.

The table counts waiting bytes in total, not per class. Up to :data:`EXACT_UP_TO`
waiting sessions the bytes of each class are summed exactly (a walk that short costs
less than a millisecond); beyond that the total is shared out by each class's number of
waiters, which is exact when one class waits — the mass update — and otherwise assumes
the classes fetch objects of the same mean size.
"""

from __future__ import annotations

from typing import Final

from .._classes import DownloadClass
from .._clock import Clock
from .._model import SchedulerStats
from .._queue_state import ActiveSession, ClassQueue, QueueState
from ..policy import CLASS_COUNT
from ._session import Session
from ._table import SessionTable

__all__ = ["EXACT_UP_TO", "queue_state_of"]

EXACT_UP_TO: Final = 4096


def queue_state_of(table: SessionTable, stats: SchedulerStats, clock: Clock) -> QueueState:
    """The operator's view of ``table`` now, beside the ``stats`` just read (see
    :class:`QueueState`)."""
    now = clock.monotonic()
    wall = clock.wall()
    active = list(table.active.values())
    heads = table.queue.heads()
    contenders = table.under_share_waiting > 0
    share = table.settings.per_principal
    remaining = [0] * CLASS_COUNT
    sessions: list[ActiveSession] = []
    for session in active:
        left = session.remaining_bytes()
        remaining[session.base_class.rank] += left
        sessions.append(_active_session(session, left, now, wall))
    waiting_bytes = _waiting_bytes(table, [stats.per_class[c].waiting for c in DownloadClass])
    per_class: dict[DownloadClass, ClassQueue] = {}
    for rank in range(CLASS_COUNT):
        lane = heads[rank]
        head: Session | None = lane[0][3] if lane else None
        per_class[DownloadClass.by_rank(rank)] = ClassQueue(
            waiting_bytes=waiting_bytes[rank],
            remaining_bytes=remaining[rank],
            head_at_share=head is not None and contenders and head.principal.active >= share,
        )
    sessions.sort(key=lambda item: item.since)
    return QueueState(at=wall, stats=stats, per_class=per_class, active_sessions=tuple(sessions))


def _active_session(session: Session, left: int, now: float, wall: float) -> ActiveSession:
    delivered = session.sent_bytes()  # with what responses still running sent
    held = max(0.0, now - session.slot_since)
    return ActiveSession(
        principal=session.principal.name,
        download_class=session.base_class,
        since=wall - held,
        bytes_delivered=delivered,
        bytes_remaining=left,
        rate=delivered / held if held > 0 else 0.0,
    )


def _waiting_bytes(table: SessionTable, counts: list[int]) -> list[int]:
    total = sum(counts)
    by_class = [0] * CLASS_COUNT
    if total <= EXACT_UP_TO:
        for lane in table.queue.heads():
            for entry in lane:
                session: Session = entry[3]
                by_class[session.base_class.rank] += session.object_size
        return by_class
    waiting = table.waiting_bytes
    return [waiting * count // total for count in counts]
