"""What an operator sees of the queue (R-VIS-2): one snapshot, read through the port.

:meth:`DownloadScheduler.queue_state` returns a :class:`QueueState`. It holds the
aggregates of :class:`SchedulerStats` plus what the statistics leave out because metrics
must never carry it: which principals hold a slot, how many bytes each class still has
to move, and whether the first waiter of a class is held back by its principal's share.
The forecast of when the queue empties and the reason a class is not draining are not
stored here: they are pure functions of this snapshot and the settings
(:mod:`arkvory_sched.policy._forecast`), so both stores answer the same way.

Keeping it cheap is part of the contract: an implementation reads counters, the active
sessions (at most ``sessions`` of them) and the head of each class — never the whole
waiting queue, which may hold a million sessions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ._classes import DownloadClass
from ._model import SchedulerStats

__all__ = ["ActiveSession", "ClassQueue", "QueueState"]


@dataclass(frozen=True, slots=True)
class ActiveSession:
    """One session holding a slot. ``since`` is wall-clock epoch seconds (when it got
    the slot); ``bytes_delivered`` counts what its responses still running have sent
    too (ADR 0033); ``rate`` is its bytes delivered over the time it has held the slot."""

    principal: str
    download_class: DownloadClass
    since: float
    bytes_delivered: int
    bytes_remaining: int
    rate: float


@dataclass(frozen=True, slots=True)
class ClassQueue:
    """The work of one class, by base class as :class:`ClassStats` counts it.

    ``waiting_bytes`` is the size of the objects its waiting sessions will fetch,
    ``remaining_bytes`` what its active sessions still have to deliver. ``head_at_share``
    says that the first waiter in the class's lane belongs to a principal at its share
    while a principal below its share waits (R-CLASS-5), so it is passed over.
    """

    waiting_bytes: int
    remaining_bytes: int
    head_at_share: bool


@dataclass(frozen=True, slots=True)
class QueueState:
    """The queue at ``at`` (wall-clock epoch seconds), as this process can see it.

    ``stats`` is what :meth:`DownloadScheduler.stats` would have answered at the same
    moment; ``per_class`` and ``active_sessions`` add what only operators may read.
    ``active_sessions`` is ordered by ``since``, oldest first.
    """

    at: float
    stats: SchedulerStats
    per_class: Mapping[DownloadClass, ClassQueue]
    active_sessions: tuple[ActiveSession, ...]
