"""``stats()`` of the in-memory store: the counters, the per-class counts and the rate.

A reader: it changes nothing but the delivery rate's remembered peak, which every
reading of the rate keeps (:meth:`Answers.current_rate`)."""

from __future__ import annotations

from .._classes import DownloadClass
from .._clock import Clock
from .._model import (
    ClassStats,
    HistogramSnapshot,
    RejectReason,
    SchedulerStats,
)
from .._request_admission import RequestAdmission
from ..policy import CLASS_COUNT, Strategy
from ..settings import SchedulerSettings
from ._answers import Answers
from ._counters import Counters
from ._table import SessionTable

__all__ = ["Statistics"]

_SHARED = Strategy.SHARED


class Statistics:
    """``stats()``: the counters, the table's per-class counts and the delivery rate."""

    __slots__ = ("_answers", "_clock", "_counters", "_requests", "_table", "settings")

    def __init__(
        self,
        settings: SchedulerSettings,
        clock: Clock,
        *,
        table: SessionTable,
        answers: Answers,
        requests: RequestAdmission,
        counters: Counters,
    ) -> None:
        self.settings = settings
        self._clock = clock
        self._table = table
        self._answers = answers
        self._requests = requests
        self._counters = counters

    def stats(self) -> SchedulerStats:
        table, counters, requests = self._table, self._counters, self._requests
        now = self._clock.monotonic()
        per_class: dict[DownloadClass, ClassStats] = {}
        for rank in range(CLASS_COUNT):
            cls = DownloadClass.by_rank(rank)
            oldest = table.queue.oldest_waiting_since(rank)
            per_class[cls] = ClassStats(
                waiting=table.waiting_by_class[rank],
                active=table.active_by_class[rank],
                paused=table.paused_by_class[rank],
                oldest_wait_seconds=0.0 if oldest is None else max(0.0, now - oldest),
                bytes_delivered=counters.bytes_by_class[rank],
                wait_seconds=counters.wait_histograms[rank].snapshot(),
            )
        empty_in: float | None = None
        rate = self._answers.current_rate()
        if table.queue and rate.known:
            active_bytes = sum(session.remaining_bytes() for session in table.active.values())
            empty_in = (table.waiting_bytes + active_bytes) / rate.bytes_per_second
        settings = self.settings
        return SchedulerStats(
            strategy=settings.strategy.value,
            admission="per-request" if settings.strategy is _SHARED else "session",
            sessions_limit=settings.sessions,
            per_class=per_class,
            request_active=requests.active,
            request_waiting=requests.waiting,
            admitted_total=counters.admitted + requests.admitted,
            completed_total=counters.completed,
            no_shows_total=counters.no_shows,
            idle_releases_total=counters.idle_releases,
            preemptions_total=counters.preemptions,
            rejections_total=_merged(counters.rejections, requests.rejections),
            estimate_error_seconds=counters.estimates.absolute().snapshot(),
            estimate_accuracy=counters.estimates.accuracy(),
            estimate_accuracy_by_client=counters.estimates.accuracy_by_client(),
            idle_slots=table.idle.figures(now),
            last_tick_seconds=counters.last_tick_seconds,
            delivery_rate=rate.measured,
            queue_empty_in_seconds=empty_in,
            closed=table.closed,
        )

    def estimate_error(self) -> HistogramSnapshot:
        return self._counters.estimates.absolute().snapshot()


def _merged(
    first: dict[RejectReason, int], second: dict[RejectReason, int]
) -> dict[RejectReason, int]:
    """The rejection counts of the session path and of the per-request places, added up."""
    merged = dict(first)
    for reason, count in second.items():
        merged[reason] = merged.get(reason, 0) + count
    return merged
