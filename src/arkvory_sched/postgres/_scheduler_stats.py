"""The scheduler's statistics: the stored queue's counts, this process's meters."""

from __future__ import annotations

from dataclasses import replace

from .._classes import DownloadClass
from .._model import (
    ClassStats,
    SchedulerStats,
)
from ..policy import (
    CLASS_COUNT,
    estimate_rate,
)
from ..settings import Strategy
from . import _sql as sql
from . import _sql_tick as tick_sql
from ._scheduler_answers import SchedulerAnswers
from ._scheduler_state import (
    _ACTIVE,
    _PAUSED,
    _WAITING,
    DATABASE_ERRORS,
)

__all__ = ["SchedulerStatsPart"]


class SchedulerStatsPart(SchedulerAnswers):
    """``stats()`` of :class:`PostgresScheduler`."""

    # ------------------------------------------------------------------ stats
    async def stats(self) -> SchedulerStats:
        requests = self._requests
        try:
            async with self._acquire() as conn:
                rows = await conn.fetch(sql.STATS)
                counters = await conn.fetchrow(sql.COUNTERS)
                remaining = await conn.fetch(tick_sql.ACTIVE_FOR_ESTIMATE)
        except DATABASE_ERRORS as error:
            self._trouble(error)
            if self._last_stats is not None:
                return replace(self._last_stats, closed=self._closed)
            rows, counters, remaining = [], None, []
        now = self._clock.monotonic()
        counts = [[0, 0, 0] for _ in range(CLASS_COUNT)]
        oldest: list[float | None] = [None] * CLASS_COUNT
        waiting_bytes = 0.0
        for row in rows:
            counts[row["base_class"]][row["state"]] = row["n"]
            if row["state"] == _WAITING:
                oldest[row["base_class"]] = row["oldest"]
                waiting_bytes += row["bytes"]
        per_class = {}
        for rank in range(CLASS_COUNT):
            since = oldest[rank]
            per_class[DownloadClass.by_rank(rank)] = ClassStats(
                waiting=counts[rank][_WAITING],
                active=counts[rank][_ACTIVE],
                paused=counts[rank][_PAUSED],
                oldest_wait_seconds=0.0 if since is None else max(0.0, now - since),
                bytes_delivered=self._bytes_by_class[rank],
                wait_seconds=self._wait_histograms[rank].snapshot(),
            )
        rejections = dict(requests.rejections)
        for reason, count in self._rejections.items():
            rejections[reason] = rejections.get(reason, 0) + count
        rate = estimate_rate(
            0.0 if counters is None else counters["fleet_rate"],
            self._local_rate(),
            self._settings.bandwidth,
        )
        waiting_total = sum(count[_WAITING] for count in counts)
        empty_in: float | None = None
        if waiting_total:
            left = sum(
                max(0, r["object_size"] - (r["start_offset"] or 0) - r["covered"])
                for r in remaining
            )
            # As in memory: every waiting byte and what active sessions have left, on the
            # whole link (the queue as stored, not a snapshot a tick may have dropped).
            empty_in = (waiting_bytes + left) / rate
        settings = self._settings
        stats = SchedulerStats(
            strategy=settings.strategy.value,
            admission="per-request" if settings.strategy is Strategy.SHARED else "session",
            sessions_limit=settings.sessions,
            per_class=per_class,
            request_active=requests.active,
            request_waiting=requests.waiting,
            admitted_total=self._admitted + requests.admitted,
            completed_total=0 if counters is None else counters["completed_total"],
            no_shows_total=0 if counters is None else counters["no_shows_total"],
            idle_releases_total=0 if counters is None else counters["idle_releases_total"],
            preemptions_total=0 if counters is None else counters["preemptions_total"],
            rejections_total=rejections,
            estimate_error_seconds=self._estimates.absolute().snapshot(),
            estimate_accuracy=self._estimates.accuracy(),
            reports_fleet_figures=self._leader.is_leader,
            last_tick_seconds=self._last_tick_seconds,
            delivery_rate=rate,
            queue_empty_in_seconds=empty_in,
            closed=self._closed,
        )
        self._last_stats = stats
        return stats
