"""Prometheus metrics read from the scheduler's aggregates at scrape time (R-VIS-3).

Nothing on the request path touches a metrics library: the scheduler already counts
what operators need (sessions per class and state, waits, no-shows, estimate error in
total and per kind of client, slots left idle while someone waits, preemptions,
rejections, tick duration) and returns it from ``stats()``. This module
turns one such snapshot into metric families when Prometheus scrapes.

``stats()`` is async (the PostgreSQL implementation queries the database) while a
prometheus-client collector's ``collect()`` is synchronous, so the two are split: the
collector reads whatever snapshot a provider returns, and :func:`metrics_app` awaits a
fresh snapshot on every scrape before it renders the registry. A snapshot is never
older than the scrape that shows it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import NamedTuple

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Receive, Scope, Send

from .._model import HistogramSnapshot, RejectReason, SchedulerStats
from .._port import DownloadScheduler
from ._readiness import (
    READ_METHODS,
    queue_empty_in,
    send_method_not_allowed,
    send_response,
    serve_non_http,
)

__all__ = ["METRIC_PREFIX", "SchedulerMetrics", "StatsCache", "metrics_app"]

METRIC_PREFIX = "arkvory_download_"
SESSION_STATES = ("waiting", "active", "paused")

StatsProvider = Callable[[], SchedulerStats | None]
"""Returns the latest stats snapshot, or ``None`` before there is one."""


class _Family(NamedTuple):
    kind: type[GaugeMetricFamily] | type[CounterMetricFamily] | type[HistogramMetricFamily]
    documentation: str
    labels: tuple[str, ...] = ()
    fleet: bool = False
    """Fleet-wide: on a store shared by many processes, one process exports it (the
    one whose stats say ``reports_fleet_figures``), so a sum over processes counts it
    once. Every other family is this process's own and sums across processes."""


_FLEET = " Fleet-wide: exported by one process of a shared queue."
_PROCESS = " This process."


# The whole catalogue, keyed by the name after the prefix. ``describe()`` exposes it so a
# registry refuses a second collector with the same names instead of exporting them twice.
_CATALOGUE: dict[str, _Family] = {
    "sessions": _Family(
        GaugeMetricFamily, "Download sessions by class and state.", ("class", "state"), fleet=True
    ),
    "oldest_wait_seconds": _Family(
        GaugeMetricFamily,
        "How long the longest-waiting session of a class has waited; 0 when none waits.",
        ("class",),
        fleet=True,
    ),
    "wait_seconds": _Family(
        HistogramMetricFamily, "Queue wait of sessions when they got a slot.", ("class",)
    ),
    "bytes_delivered_total": _Family(
        CounterMetricFamily, "Response bytes sent, by class.", ("class",)
    ),
    "admitted_total": _Family(CounterMetricFamily, "Responses admitted (session and per-request)."),
    "completed_total": _Family(
        CounterMetricFamily, "Download sessions delivered in full.", fleet=True
    ),
    "no_shows_total": _Family(
        CounterMetricFamily,
        "Waiting sessions dropped because the client stopped polling.",
        fleet=True,
    ),
    "idle_releases_total": _Family(
        CounterMetricFamily, "Active sessions whose slot was released after idling.", fleet=True
    ),
    "preemptions_total": _Family(
        CounterMetricFamily,
        "Slots taken back for a more urgent or long-waiting session.",
        fleet=True,
    ),
    "rejections_total": _Family(
        CounterMetricFamily, "Requests turned away busy, by reason.", ("reason",)
    ),
    "estimate_error_seconds": _Family(
        HistogramMetricFamily, "Absolute difference between first estimated and actual start."
    ),
    "estimate_signed_error_seconds": _Family(
        HistogramMetricFamily,
        "Actual minus announced start, per wait; negative: started earlier than announced.",
    ),
    "estimate_relative_error": _Family(
        HistogramMetricFamily, "Absolute start error over the announced wait, per wait."
    ),
    "estimate_inside_interval_total": _Family(
        CounterMetricFamily, "Starts inside the interval announced with their estimate."
    ),
    # The four above split by the kind of client that waited (issue #28): `protocol`
    # sent a download id, `third_party` did not (curl, wget, a browser).
    "client_estimate_error_seconds": _Family(
        HistogramMetricFamily,
        "Absolute difference between first estimated and actual start, by kind of client.",
        ("client",),
    ),
    "client_estimate_signed_error_seconds": _Family(
        HistogramMetricFamily,
        "Actual minus announced start, per wait, by kind of client.",
        ("client",),
    ),
    "client_estimate_relative_error": _Family(
        HistogramMetricFamily,
        "Absolute start error over the announced wait, per wait, by kind of client.",
        ("client",),
    ),
    "client_estimate_inside_interval_total": _Family(
        CounterMetricFamily,
        "Starts inside the interval announced with their estimate, by kind of client.",
        ("client",),
    ),
    "idle_slot_seconds_total": _Family(
        CounterMetricFamily,
        "Slot-seconds a slot a waiter could take stayed free while someone waited.",
        fleet=True,
    ),
    "idle_slots": _Family(
        GaugeMetricFamily, "Free slots a waiter could take, while someone waits.", fleet=True
    ),
    "idle_stretch_seconds": _Family(
        GaugeMetricFamily,
        "Length of the current stretch with an idle slot while someone waits, or the last one.",
        fleet=True,
    ),
    "longest_idle_stretch_seconds": _Family(
        GaugeMetricFamily,
        "The longest stretch with an idle slot while someone waited, since the start.",
        fleet=True,
    ),
    "held_requests": _Family(
        GaugeMetricFamily, "Requests without a download id held by the server before queueing."
    ),
    "tick_duration_seconds": _Family(GaugeMetricFamily, "Duration of the last scheduler tick."),
    "per_request_active": _Family(GaugeMetricFamily, "Responses admitted per request in flight."),
    "per_request_waiting": _Family(GaugeMetricFamily, "Requests waiting for a per-request place."),
    "delivery_rate_bytes_per_second": _Family(
        GaugeMetricFamily, "Measured delivery rate the estimates are based on.", fleet=True
    ),
    "queue_empty_in_seconds": _Family(
        GaugeMetricFamily,
        "Forecast until the queue is empty; 0 when nothing waits, absent when unknown.",
        fleet=True,
    ),
    "session_slots": _Family(GaugeMetricFamily, "Download sessions that may be active at once."),
    "session_slots_bound": _Family(
        GaugeMetricFamily,
        "The bounds the session slots size themselves within (only under min_sessions).",
        ("bound",),
    ),
    "session_slots_reason": _Family(
        GaugeMetricFamily,
        "Why the self-sizing slots stand where they are (always 1; only under min_sessions).",
        ("reason",),
    ),
    "strategy": _Family(
        GaugeMetricFamily, "The scheduling strategy in force (always 1).", ("strategy", "admission")
    ),
}


class StatsCache:
    """Holds the latest :meth:`DownloadScheduler.stats` snapshot for a synchronous reader.

    Call :meth:`refresh` from async code (a scrape handler, a periodic task) and pass
    :meth:`latest` as the provider of :class:`SchedulerMetrics`.
    """

    __slots__ = ("_latest", "_scheduler")

    def __init__(self, scheduler: DownloadScheduler) -> None:
        self._scheduler = scheduler
        self._latest: SchedulerStats | None = None

    async def refresh(self) -> None:
        """Read a fresh snapshot from the scheduler."""
        self._latest = await self._scheduler.stats()

    def latest(self) -> SchedulerStats | None:
        """The snapshot of the last :meth:`refresh`; ``None`` before the first one."""
        return self._latest


class SchedulerMetrics(Collector):
    """A prometheus-client collector exporting one scheduler's aggregates.

    It calls ``scheduler_stats_provider()`` on every ``collect()`` and keeps no state of
    its own, so a scrape shows the snapshot the provider holds at that moment. ``held`` reports the
    middleware's held requests (0 without it). Before the provider has a snapshot only
    ``held_requests`` is exported.
    """

    def __init__(
        self,
        scheduler_stats_provider: StatsProvider,
        *,
        held: Callable[[], int] | None = None,
    ) -> None:
        self._provider = scheduler_stats_provider
        self._held = held or _nobody_held

    def collect(self) -> Iterator[Metric]:
        held = _gauge("held_requests")
        held.add_metric([], float(self._held()))
        yield held
        stats = self._provider()
        if stats is not None:
            yield from scheduler_families(stats)

    def describe(self) -> Iterator[Metric]:
        """The names this collector exports, without samples (for collision checks)."""
        for key, family in _CATALOGUE.items():
            yield family.kind(METRIC_PREFIX + key, _documentation(family), labels=family.labels)


def scheduler_families(stats: SchedulerStats) -> Iterator[Metric]:
    """The metric families of one stats snapshot (everything except ``held_requests``).

    Fleet-wide families only when the snapshot says this process reports them.
    """
    if stats.reports_fleet_figures:
        yield from _fleet_families(stats)
    yield from _process_families(stats)


def _fleet_families(stats: SchedulerStats) -> Iterator[Metric]:
    sessions = _gauge("sessions")
    oldest = _gauge("oldest_wait_seconds")
    for cls, class_stats in sorted(stats.per_class.items(), key=lambda item: item[0].rank):
        counts = (class_stats.waiting, class_stats.active, class_stats.paused)
        for state, count in zip(SESSION_STATES, counts, strict=True):
            sessions.add_metric([cls.value, state], float(count))
        oldest.add_metric([cls.value], class_stats.oldest_wait_seconds)
    yield from (sessions, oldest)
    yield _counter("completed_total", stats.completed_total)
    yield _counter("no_shows_total", stats.no_shows_total)
    yield _counter("idle_releases_total", stats.idle_releases_total)
    yield _counter("preemptions_total", stats.preemptions_total)
    yield _gauge("delivery_rate_bytes_per_second", stats.delivery_rate)
    empty_in = queue_empty_in(stats)
    if empty_in is not None:
        yield _gauge("queue_empty_in_seconds", empty_in)
    idle = stats.idle_slots
    yield _counter("idle_slot_seconds_total", idle.slot_seconds)
    yield _gauge("idle_slots", idle.slots)
    yield _gauge("idle_stretch_seconds", idle.stretch_seconds)
    yield _gauge("longest_idle_stretch_seconds", idle.longest_stretch_seconds)


def _process_families(stats: SchedulerStats) -> Iterator[Metric]:
    waits = _histogram("wait_seconds")
    delivered = _counter("bytes_delivered_total")
    for cls, class_stats in sorted(stats.per_class.items(), key=lambda item: item[0].rank):
        snapshot = class_stats.wait_seconds
        waits.add_metric([cls.value], _buckets(snapshot), snapshot.total)
        delivered.add_metric([cls.value], float(class_stats.bytes_delivered))
    yield from (waits, delivered)
    yield _counter("admitted_total", stats.admitted_total)

    rejections = _counter("rejections_total")
    for reason in RejectReason:
        rejections.add_metric([reason.value], float(stats.rejections_total.get(reason, 0)))
    yield rejections

    estimate_error = _histogram("estimate_error_seconds")
    snapshot = stats.estimate_error_seconds
    estimate_error.add_metric([], _buckets(snapshot), snapshot.total)
    yield estimate_error
    accuracy = stats.estimate_accuracy
    for key, snapshot in (
        ("estimate_signed_error_seconds", accuracy.signed_error_seconds),
        ("estimate_relative_error", accuracy.relative_error),
    ):
        family = _histogram(key)
        family.add_metric([], _buckets(snapshot), snapshot.total)
        yield family
    yield _counter("estimate_inside_interval_total", accuracy.inside_interval)
    yield from _client_estimate_families(stats)

    yield _gauge("tick_duration_seconds", stats.last_tick_seconds)
    yield _gauge("per_request_active", stats.request_active)
    yield _gauge("per_request_waiting", stats.request_waiting)
    yield _gauge("session_slots", stats.sessions_limit)
    yield from _sizing_families(stats)
    strategy = _gauge("strategy")
    strategy.add_metric([stats.strategy, stats.admission], 1.0)
    yield strategy


def _client_estimate_families(stats: SchedulerStats) -> Iterator[Metric]:
    """The estimate accuracy per kind of client, every kind with its series."""
    histograms = {
        key: _histogram(key)
        for key in (
            "client_estimate_error_seconds",
            "client_estimate_signed_error_seconds",
            "client_estimate_relative_error",
        )
    }
    inside = _counter("client_estimate_inside_interval_total")
    for kind, accuracy in sorted(stats.estimate_accuracy_by_client.items()):
        label = [kind.value]
        for key, snapshot in (
            ("client_estimate_error_seconds", accuracy.absolute_error_seconds),
            ("client_estimate_signed_error_seconds", accuracy.signed_error_seconds),
            ("client_estimate_relative_error", accuracy.relative_error),
        ):
            histograms[key].add_metric(label, _buckets(snapshot), snapshot.total)
        inside.add_metric(label, float(accuracy.inside_interval))
    yield from histograms.values()
    yield inside


def metrics_app(
    scheduler: DownloadScheduler,
    *,
    registry: CollectorRegistry | None = None,
    held: Callable[[], int] | None = None,
) -> ASGIApp:
    """A pure ASGI app serving the Prometheus text format (mount it at ``/metrics``).

    Each ``GET`` awaits ``scheduler.stats()`` and then renders ``registry``. Without a
    registry the app gets a fresh one holding only its collector, so two apps (or two
    tests) never collide in the global registry; a registry passed in gets the collector
    registered once, here, and keeps its other collectors. Other methods get ``405``.

    Concurrent scrapes share one snapshot holder, so a scrape may show the snapshot a
    concurrent scrape read; either was taken during the scrape. If ``stats()`` raises, the
    error propagates and the server answers ``500``: Prometheus records a failed scrape
    rather than stale values.
    """
    cache = StatsCache(scheduler)
    target = registry if registry is not None else CollectorRegistry()
    target.register(SchedulerMetrics(cache.latest, held=held))

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await serve_non_http(scope, receive, send)
            return
        method = scope["method"]
        if method not in READ_METHODS:
            await send_method_not_allowed(send, method)
            return
        await cache.refresh()
        body = generate_latest(target)
        await send_response(send, 200, body, CONTENT_TYPE_LATEST, head=method == "HEAD")

    return app


def _documentation(family: _Family) -> str:
    return family.documentation + (_FLEET if family.fleet else _PROCESS)


def _nobody_held() -> int:
    return 0


def _gauge(key: str, value: float | None = None) -> GaugeMetricFamily:
    family = _CATALOGUE[key]
    assert family.kind is GaugeMetricFamily, key
    if value is None:
        return GaugeMetricFamily(METRIC_PREFIX + key, _documentation(family), labels=family.labels)
    return GaugeMetricFamily(METRIC_PREFIX + key, _documentation(family), value=float(value))


def _counter(key: str, value: float | None = None) -> CounterMetricFamily:
    family = _CATALOGUE[key]
    assert family.kind is CounterMetricFamily, key
    if value is None:
        return CounterMetricFamily(
            METRIC_PREFIX + key, _documentation(family), labels=family.labels
        )
    return CounterMetricFamily(METRIC_PREFIX + key, _documentation(family), value=float(value))


def _histogram(key: str) -> HistogramMetricFamily:
    family = _CATALOGUE[key]
    assert family.kind is HistogramMetricFamily, key
    return HistogramMetricFamily(METRIC_PREFIX + key, _documentation(family), labels=family.labels)


def _buckets(snapshot: HistogramSnapshot) -> list[tuple[str, float]]:
    """Prometheus buckets of a cumulative snapshot; ``+Inf`` holds every observation."""
    buckets = [
        (_le(bound), float(count))
        for bound, count in zip(snapshot.bounds, snapshot.counts, strict=True)
        if not math.isinf(bound)
    ]
    buckets.append(("+Inf", float(snapshot.count)))
    return buckets


def _le(bound: float) -> str:
    """The ``le`` label of a finite bound as a decimal float (``1.0``, ``3600.0``)."""
    return repr(float(bound))


def _sizing_families(stats: SchedulerStats) -> Iterator[Metric]:
    """The self-sizing slots' bounds and why the count is where it is (ADR 0038): only
    while the count sizes itself, so a fixed count exports what it always did."""
    sizing = stats.slot_sizing
    if sizing is None:
        return
    bounds = _gauge("session_slots_bound")
    bounds.add_metric(["minimum"], float(sizing.minimum))
    bounds.add_metric(["maximum"], float(sizing.maximum))
    yield bounds
    if sizing.reason is not None:
        reason = _gauge("session_slots_reason")
        reason.add_metric([sizing.reason], 1.0)
        yield reason
