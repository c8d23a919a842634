"""The scheduler's statistics: the stored queue's counts, this process's meters."""

from __future__ import annotations

from dataclasses import replace

from .._classes import DownloadClass
from .._clock import Clock
from .._exceptions import StoreUnavailableError
from .._model import (
    ClassStats,
    SchedulerStats,
    SlotSizingState,
)
from .._request_admission import RequestAdmission
from ..policy import (
    CLASS_COUNT,
    estimate_rate,
)
from ..settings import Strategy
from . import _sql as sql
from . import _sql_tick as tick_sql
from ._boundary import Connections
from ._idle_slots import idle_slots_of
from ._leader import QueueLeader
from ._meters import Meters
from ._running import Running

__all__ = ["Statistics"]


class Statistics:
    """``stats()`` of :class:`PostgresScheduler`: the shared queue as stored, and what
    this process measured; the last figures stand in while the database is away."""

    def __init__(
        self,
        running: Running,
        connections: Connections,
        requests: RequestAdmission,
        meters: Meters,
        leader: QueueLeader,
        clock: Clock,
    ) -> None:
        self._running = running
        self._connections = connections
        self._requests = requests
        self._meters = meters
        self._leader = leader
        self._clock = clock
        self._last_stats: SchedulerStats | None = None

    async def stats(self) -> SchedulerStats:
        requests = self._requests
        meters = self._meters
        try:
            async with self._connections.acquire() as conn:
                rows = await conn.fetch(sql.STATS)
                counters = await conn.fetchrow(sql.COUNTERS)
                remaining = await conn.fetch(tick_sql.ACTIVE_FOR_ESTIMATE)
        except StoreUnavailableError as error:
            self._connections.trouble(error)
            if self._last_stats is not None:
                return replace(self._last_stats, closed=self._running.closed)
            rows, counters, remaining = [], None, []
        now = self._clock.monotonic()
        counts = [[0, 0, 0] for _ in range(CLASS_COUNT)]
        oldest: list[float | None] = [None] * CLASS_COUNT
        waiting_bytes = 0.0
        for row in rows:
            counts[row["base_class"]][row["state"]] = row["n"]
            if row["state"] == sql.WAITING:
                oldest[row["base_class"]] = row["oldest"]
                waiting_bytes += row["bytes"]
        per_class = {}
        for rank in range(CLASS_COUNT):
            since = oldest[rank]
            per_class[DownloadClass.by_rank(rank)] = ClassStats(
                waiting=counts[rank][sql.WAITING],
                active=counts[rank][sql.ACTIVE],
                paused=counts[rank][sql.PAUSED],
                oldest_wait_seconds=0.0 if since is None else max(0.0, now - since),
                bytes_delivered=meters.bytes_by_class[rank],
                wait_seconds=meters.wait_histograms[rank].snapshot(),
            )
        rejections = dict(requests.rejections)
        for reason, count in meters.rejections.items():
            rejections[reason] = rejections.get(reason, 0) + count
        rate = estimate_rate(
            0.0 if counters is None else counters["fleet_rate"],
            0.0,
            self._running.settings.bandwidth,
        )
        waiting_total = sum(count[sql.WAITING] for count in counts)
        empty_in: float | None = None
        if waiting_total and rate.known:
            left = sum(
                max(0, r["object_size"] - (r["start_offset"] or 0) - r["covered"])
                for r in remaining
            )
            # As in memory: every waiting byte and what active sessions have left, on the
            # whole link (the queue as stored, not a snapshot a tick may have dropped).
            empty_in = (waiting_bytes + left) / rate.bytes_per_second
        settings, configured = self._running.settings, self._running.configured
        sizing = None
        if configured.min_sessions is not None and configured.automatic_sessions:
            sizing = SlotSizingState(
                configured.min_sessions, configured.sessions, self._running.sizing_reason
            )
        stats = SchedulerStats(
            slot_sizing=sizing,
            strategy=settings.strategy.value,
            admission="per-request" if settings.strategy is Strategy.SHARED else "session",
            sessions_limit=settings.sessions,
            per_class=per_class,
            request_active=requests.active,
            request_waiting=requests.waiting,
            admitted_total=meters.admitted + requests.admitted,
            completed_total=0 if counters is None else counters["completed_total"],
            no_shows_total=0 if counters is None else counters["no_shows_total"],
            idle_releases_total=0 if counters is None else counters["idle_releases_total"],
            preemptions_total=0 if counters is None else counters["preemptions_total"],
            rejections_total=rejections,
            estimate_error_seconds=meters.estimates.absolute().snapshot(),
            estimate_accuracy=meters.estimates.accuracy(),
            estimate_accuracy_by_client=meters.estimates.accuracy_by_client(),
            idle_slots=idle_slots_of(counters),
            reports_fleet_figures=self._leader.is_leader,
            last_tick_seconds=meters.last_tick_seconds,
            delivery_rate=rate.measured,
            queue_empty_in_seconds=empty_in,
            closed=self._running.closed,
        )
        self._last_stats = stats
        return stats
