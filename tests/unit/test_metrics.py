"""Prometheus metrics read from the scheduler's aggregates at scrape time (R-VIS-3).

A real in-memory scheduler on a fake clock is driven into a known state, scraped through
the ASGI app, and the exposition is parsed back with prometheus-client's own parser.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import prometheus_client
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from starlette.types import ASGIApp

from arkvory_sched import (
    Admitted,
    Delivered,
    DownloadRequest,
    HistogramSnapshot,
    IdleSlots,
    InMemoryDownloadScheduler,
    PrincipalKind,
    Queued,
    Rejected,
    RejectReason,
    SchedulerSettings,
    SchedulerStats,
)
from arkvory_sched.measures._accuracy import EstimateScorer
from arkvory_sched.observability._metrics import SchedulerMetrics, StatsCache, metrics_app
from arkvory_sched.testing import FakeClock

MIB = 1024 * 1024
BIG = 64 * MIB  # above the 16 MiB session threshold: admitted per session
SMALL = 1 * MIB  # below it: admitted per request
P = "arkvory_download_"

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# --- driving a scheduler -----------------------------------------------------------------


def request(
    principal: str,
    object_id: str,
    *,
    size: int = BIG,
    kind: PrincipalKind = PrincipalKind.SERVICE,
    requested_class: str | None = None,
) -> DownloadRequest:
    return DownloadRequest(
        principal=principal,
        principal_kind=kind,
        object_id=object_id,
        object_size=size,
        download_id=f"{principal}-{object_id}",
        client_address="198.51.100.23",
        requested_class=requested_class,
    )


def new_scheduler(clock: FakeClock) -> InMemoryDownloadScheduler:
    """Two slots, no reserve, no preemption or aging; one queued session per principal;
    the link's rate configured, so that the waiters' starts are estimates, not guesses
    (ADR 0042), and are scored."""
    settings = SchedulerSettings(
        bandwidth=100 * 1024 * 1024,
        sessions=2,
        reserve=0,
        per_principal=2,
        preempt=False,
        aging_minutes=0.0,
        queue_per_principal=1,
    )
    return InMemoryDownloadScheduler(settings, clock=clock)


async def grant_of(scheduler: InMemoryDownloadScheduler, req: DownloadRequest) -> Admitted:
    decision = await scheduler.admit(req)
    assert isinstance(decision, Admitted), decision
    return decision


async def wait_of(scheduler: InMemoryDownloadScheduler, req: DownloadRequest) -> Queued:
    decision = await scheduler.admit(req)
    assert isinstance(decision, Queued), decision
    return decision


@dataclass
class Busy:
    scheduler: InMemoryDownloadScheduler
    clock: FakeClock
    last_tick_seconds: float


async def busy_scheduler() -> Busy:
    """A scheduler 35 s into a small mass update.

    t=0   alice (release) and bob (interactive) start at once; carol (release) and dave
          (bulk) queue; carol's second download is rejected (one queued per principal).
    t=1   carol and dave poll.
    t=30  alice and bob finish; after a tick carol and dave take the slots, each having
          waited 30 s; erin (background) arrives and queues; frank reads a small file
          per request and keeps the response in flight.
    t=35  erin has waited 5 s.
    """
    clock = FakeClock()
    scheduler = new_scheduler(clock)
    alice = await grant_of(scheduler, request("alice", "app-2.4.iso"))
    bob = await grant_of(scheduler, request("bob", "dataset.tar", kind=PrincipalKind.PERSON))
    carol = request("carol", "app-2.4.iso")
    dave = request("dave", "backup.img", requested_class="bulk")
    await wait_of(scheduler, carol)
    await wait_of(scheduler, dave)
    rejected = await scheduler.admit(request("carol", "other.iso"))
    assert isinstance(rejected, Rejected)
    assert rejected.reason is RejectReason.PRINCIPAL_LIMIT
    await scheduler.tick()
    clock.advance(1)
    await wait_of(scheduler, carol)
    await wait_of(scheduler, dave)
    clock.advance(29)
    for grant in (alice.grant, bob.grant):
        await scheduler.report(grant, Delivered(grant.byte_range))
    tick = await scheduler.tick()
    await grant_of(scheduler, carol)
    await grant_of(scheduler, dave)
    await wait_of(scheduler, request("erin", "nightly.zip", requested_class="background"))
    small = await grant_of(scheduler, request("frank", "notes.txt", size=SMALL))
    assert small.admission == "per-request"
    clock.advance(5)
    return Busy(scheduler, clock, tick.duration)


# --- scraping ------------------------------------------------------------------------------


async def scrape(app: ASGIApp, method: str = "GET") -> httpx.Response:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://arkvory.test") as client:
        return await client.request(method, "/metrics")


def families(text: str) -> dict[str, Metric]:
    return {family.name: family for family in text_string_to_metric_families(text)}


def samples(text: str) -> Samples:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(found: Samples, name: str, labels: dict[str, str] | None = None) -> float:
    return found[(P + name, frozenset((labels or {}).items()))]


def histogram(family: Metric, labels: dict[str, str] | None = None) -> HistogramSnapshot:
    """A parsed histogram series back in the scheduler's shape (``+Inf`` kept last)."""
    wanted = labels or {}
    own = [s for s in family.samples if {k: v for k, v in s.labels.items() if k != "le"} == wanted]
    buckets = [s for s in own if s.name.endswith("_bucket")]
    (count,) = (s.value for s in own if s.name.endswith("_count"))
    (total,) = (s.value for s in own if s.name.endswith("_sum"))
    assert buckets[-1].labels["le"] == "+Inf"
    return HistogramSnapshot(
        bounds=tuple(float(s.labels["le"]) for s in buckets),
        counts=tuple(int(s.value) for s in buckets),
        count=int(count),
        total=total,
    )


# --- the exported values -------------------------------------------------------------------


@pytest.mark.anyio
async def test_scrape_exports_sessions_by_class_and_state() -> None:
    busy = await busy_scheduler()
    found = samples((await scrape(metrics_app(busy.scheduler))).text)
    expected = {
        "interactive": (0, 0, 0),
        "release": (0, 1, 0),
        "bulk": (0, 1, 0),
        "background": (1, 0, 0),
    }
    for cls, counts in expected.items():
        for state, count in zip(("waiting", "active", "paused"), counts, strict=True):
            assert value(found, "sessions", {"class": cls, "state": state}) == count, (cls, state)
    assert value(found, "oldest_wait_seconds", {"class": "background"}) == 5.0
    assert value(found, "oldest_wait_seconds", {"class": "release"}) == 0.0
    assert value(found, "session_slots") == 2
    assert value(found, "per_request_active") == 1
    assert value(found, "per_request_waiting") == 0
    assert value(found, "strategy", {"strategy": "ordered", "admission": "session"}) == 1


@pytest.mark.anyio
async def test_scrape_exports_counters() -> None:
    busy = await busy_scheduler()
    found = samples((await scrape(metrics_app(busy.scheduler))).text)
    assert value(found, "admitted_total") == 5  # alice, bob, carol, dave, frank
    assert value(found, "completed_total") == 2  # alice, bob
    assert value(found, "no_shows_total") == 0
    assert value(found, "idle_releases_total") == 0
    assert value(found, "preemptions_total") == 0
    assert value(found, "bytes_delivered_total", {"class": "release"}) == BIG
    assert value(found, "bytes_delivered_total", {"class": "interactive"}) == BIG
    assert value(found, "bytes_delivered_total", {"class": "bulk"}) == 0
    assert value(found, "bytes_delivered_total", {"class": "background"}) == 0
    assert value(found, "rejections_total", {"reason": "principal_limit"}) == 1


@pytest.mark.anyio
async def test_every_reject_reason_is_exported_with_zero_by_default() -> None:
    scheduler = new_scheduler(FakeClock())
    found = samples((await scrape(metrics_app(scheduler))).text)
    for reason in RejectReason:
        assert value(found, "rejections_total", {"reason": reason.value}) == 0


@pytest.mark.anyio
async def test_wait_histogram_per_class() -> None:
    busy = await busy_scheduler()
    parsed = families((await scrape(metrics_app(busy.scheduler))).text)
    waits = parsed[P + "wait_seconds"]
    assert waits.type == "histogram"
    release = histogram(waits, {"class": "release"})
    assert (release.count, release.total) == (2, 30.0)  # alice at once, carol after 30 s
    assert dict(zip(release.bounds, release.counts, strict=True))[10.0] == 1
    assert dict(zip(release.bounds, release.counts, strict=True))[30.0] == 2
    bulk = histogram(waits, {"class": "bulk"})
    assert (bulk.count, bulk.total) == (1, 30.0)
    assert dict(zip(bulk.bounds, bulk.counts, strict=True))[10.0] == 0
    interactive = histogram(waits, {"class": "interactive"})
    assert (interactive.count, interactive.total) == (1, 0.0)
    background = histogram(waits, {"class": "background"})
    assert background.count == 0  # erin still waits: a wait is observed when it ends


@pytest.mark.anyio
async def test_histograms_are_cumulative_and_inf_is_the_count() -> None:
    busy = await busy_scheduler()
    stats = await busy.scheduler.stats()
    parsed = families((await scrape(metrics_app(busy.scheduler))).text)
    series: list[tuple[HistogramSnapshot, HistogramSnapshot]] = [
        (histogram(parsed[P + "wait_seconds"], {"class": cls.value}), s.wait_seconds)
        for cls, s in stats.per_class.items()
    ]
    series.append((histogram(parsed[P + "estimate_error_seconds"]), stats.estimate_error_seconds))
    assert stats.estimate_error_seconds.count >= 1  # carol and dave were told an estimate
    for exported, source in series:
        assert list(exported.counts) == sorted(exported.counts)
        assert exported.counts[-1] == exported.count == source.count
        assert exported.bounds == (*map(float, source.bounds), math.inf)
        assert exported.counts[:-1] == source.counts
        assert exported.total == pytest.approx(source.total)


@pytest.mark.anyio
async def test_gauges_follow_the_scheduler_measurements() -> None:
    busy = await busy_scheduler()
    found = samples((await scrape(metrics_app(busy.scheduler, held=lambda: 3))).text)
    stats = await busy.scheduler.stats()
    assert value(found, "held_requests") == 3
    assert value(found, "tick_duration_seconds") == busy.last_tick_seconds
    assert value(found, "delivery_rate_bytes_per_second") == stats.delivery_rate
    assert stats.queue_empty_in_seconds is not None
    assert value(found, "queue_empty_in_seconds") == stats.queue_empty_in_seconds


@pytest.mark.anyio
async def test_queue_forecast_is_zero_when_nothing_waits() -> None:
    """An empty queue is empty in 0 s: the series is there, so an alert on it (or on
    its absence) can tell an empty queue from a forecast nobody can make."""
    scheduler = new_scheduler(FakeClock())
    text = (await scrape(metrics_app(scheduler))).text
    assert value(samples(text), "queue_empty_in_seconds") == 0.0
    assert "NaN" not in text
    assert value(samples(text), "held_requests") == 0


@pytest.mark.anyio
async def test_queue_forecast_is_absent_while_some_wait_and_it_cannot_be_made() -> None:
    busy = await busy_scheduler()
    stats = dataclasses.replace(await busy.scheduler.stats(), queue_empty_in_seconds=None)
    assert stats.waiting > 0
    registry = CollectorRegistry()
    registry.register(SchedulerMetrics(lambda: stats))
    assert P + "queue_empty_in_seconds" not in families(generate_latest(registry).decode())


# --- scrape time ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_metrics_are_computed_at_scrape_time() -> None:
    busy = await busy_scheduler()
    app = metrics_app(busy.scheduler)
    before = samples((await scrape(app)).text)
    busy.clock.advance(60)
    await wait_of(busy.scheduler, request("grace", "app-2.4.iso", requested_class="background"))
    after = samples((await scrape(app)).text)
    background_waiting = {"class": "background", "state": "waiting"}
    assert value(before, "sessions", background_waiting) == 1
    assert value(after, "sessions", background_waiting) == 2
    assert value(before, "oldest_wait_seconds", {"class": "background"}) == 5.0
    assert value(after, "oldest_wait_seconds", {"class": "background"}) == 65.0


def test_collector_reads_the_provider_on_every_collect() -> None:
    snapshots: list[SchedulerStats | None] = [None]
    registry = CollectorRegistry()
    registry.register(SchedulerMetrics(lambda: snapshots[-1], held=lambda: 2))
    empty = families(generate_latest(registry).decode())
    assert set(empty) == {P + "held_requests"}  # nothing to show before a snapshot
    snapshots.append(dataclasses.replace(_synthetic_stats(), admitted_total=7))
    assert value(samples(generate_latest(registry).decode()), "admitted_total") == 7
    snapshots.append(dataclasses.replace(_synthetic_stats(), admitted_total=9))
    assert value(samples(generate_latest(registry).decode()), "admitted_total") == 9


def test_observations_above_the_last_bound_count_only_in_inf() -> None:
    wide = HistogramSnapshot(bounds=(1, 10), counts=(1, 3), count=5, total=1234.5)
    stats = dataclasses.replace(_synthetic_stats(), estimate_error_seconds=wide)
    registry = CollectorRegistry()
    registry.register(SchedulerMetrics(lambda: stats))
    parsed = families(generate_latest(registry).decode())
    exported = histogram(parsed[P + "estimate_error_seconds"])
    assert exported.bounds == (1.0, 10.0, math.inf)
    assert exported.counts == (1, 3, 5)
    assert (exported.count, exported.total) == (5, 1234.5)


@pytest.mark.anyio
async def test_non_finite_forecast_is_left_out() -> None:
    busy = await busy_scheduler()
    stats = dataclasses.replace(await busy.scheduler.stats(), queue_empty_in_seconds=math.inf)
    assert stats.waiting > 0
    registry = CollectorRegistry()
    registry.register(SchedulerMetrics(lambda: stats))
    assert P + "queue_empty_in_seconds" not in families(generate_latest(registry).decode())


FLEET_WIDE = {
    "sessions",
    "oldest_wait_seconds",
    "completed_total",
    "no_shows_total",
    "idle_releases_total",
    "preemptions_total",
    "delivery_rate_bytes_per_second",
    "queue_empty_in_seconds",
    "idle_slot_seconds_total",
    "idle_slots",
    "idle_stretch_seconds",
    "longest_idle_stretch_seconds",
}


def _exported(stats: SchedulerStats) -> dict[str, Metric]:
    registry = CollectorRegistry()
    registry.register(SchedulerMetrics(lambda: stats))
    return families(generate_latest(registry).decode())


def test_fleet_wide_figures_are_exported_only_by_the_process_that_reports_them() -> None:
    """A queue shared by N processes must not be counted N times by a sum over them."""
    stats = dataclasses.replace(
        _synthetic_stats(), queue_empty_in_seconds=12.0, completed_total=5, admitted_total=3
    )
    reporter = _exported(stats)
    other_stats = dataclasses.replace(stats, reports_fleet_figures=False)
    other = _exported(other_stats)
    # The exposition parser names a counter's family without its ``_total``.
    fleet = {P + name.removesuffix("_total") for name in FLEET_WIDE}
    assert fleet <= set(reporter)
    assert not fleet & set(other)
    assert set(reporter) - set(other) == fleet
    assert value(samples(generate_latest_of(other_stats)), "admitted_total") == 3


def generate_latest_of(stats: SchedulerStats) -> str:
    registry = CollectorRegistry()
    registry.register(SchedulerMetrics(lambda: stats))
    return generate_latest(registry).decode()


def test_help_text_says_whether_a_figure_is_fleet_wide_or_this_process() -> None:
    exported = _exported(dataclasses.replace(_synthetic_stats(), queue_empty_in_seconds=1.0))
    for name, family in exported.items():
        if name == P + "held_requests":
            continue
        fleet = {name.removesuffix("_total") for name in FLEET_WIDE}
        scope = "Fleet-wide" if name.removeprefix(P) in fleet else "This process"
        assert scope in family.documentation, (name, family.documentation)


def test_estimate_accuracy_is_exported_signed_relative_and_inside() -> None:
    scorer = EstimateScorer()
    scorer.score(estimated_at=0.0, announced=100.0, started=95.0, has_id=True)  # early, inside
    scorer.score(estimated_at=0.0, announced=100.0, started=150.0, has_id=True)  # late
    stats = dataclasses.replace(_synthetic_stats(), estimate_accuracy=scorer.accuracy())
    exported = _exported(stats)
    # With negative buckets the exposition carries no _sum and _count (a sum of signed
    # values is no size): the +Inf bucket counts the starts.
    signed = {
        sample.labels["le"]: sample.value
        for sample in exported[P + "estimate_signed_error_seconds"].samples
    }
    assert (signed["-10.0"], signed["-2.0"], signed["30.0"], signed["+Inf"]) == (0, 1, 1, 2)
    relative = histogram(exported[P + "estimate_relative_error"])
    assert (relative.count, relative.total) == (2, 0.55)
    text = generate_latest_of(stats)
    assert value(samples(text), "estimate_inside_interval_total") == 1


def test_estimate_accuracy_is_exported_per_kind_of_client_beside_the_totals() -> None:
    """Issue #28: a protocol client's waits and a third-party tool's are exported each
    under its ``client`` label, and the unlabelled totals still count them all."""
    scorer = EstimateScorer()
    scorer.score(estimated_at=0.0, announced=100.0, started=95.0, has_id=True)  # inside
    scorer.score(estimated_at=0.0, announced=100.0, started=150.0, has_id=False)  # 50 s late
    scorer.score(estimated_at=0.0, announced=10.0, started=10.0, has_id=False)  # exact
    stats = dataclasses.replace(
        _synthetic_stats(),
        estimate_error_seconds=scorer.absolute().snapshot(),
        estimate_accuracy=scorer.accuracy(),
        estimate_accuracy_by_client=scorer.accuracy_by_client(),
    )
    exported = _exported(stats)
    found = samples(generate_latest_of(stats))
    protocol, third_party = {"client": "protocol"}, {"client": "third_party"}
    absolute = exported[P + "client_estimate_error_seconds"]
    assert histogram(absolute, protocol).total == 5.0
    assert (histogram(absolute, third_party).count, histogram(absolute, third_party).total) == (
        2,
        50.0,
    )
    relative = exported[P + "client_estimate_relative_error"]
    assert histogram(relative, third_party).total == pytest.approx(0.5)
    signed = {
        (sample.labels["client"], sample.labels["le"]): sample.value
        for sample in exported[P + "client_estimate_signed_error_seconds"].samples
    }
    assert (signed["protocol", "-2.0"], signed["protocol", "+Inf"]) == (1, 1)
    assert (signed["third_party", "0.0"], signed["third_party", "+Inf"]) == (1, 2)
    assert value(found, "client_estimate_inside_interval_total", protocol) == 1
    assert value(found, "client_estimate_inside_interval_total", third_party) == 1
    assert value(found, "estimate_inside_interval_total") == 2
    assert histogram(exported[P + "estimate_error_seconds"]).count == 3


def test_every_kind_of_client_has_its_series_before_any_score() -> None:
    found = samples(generate_latest_of(_synthetic_stats()))
    for kind in ("protocol", "third_party"):
        labels = {"client": kind}
        assert value(found, "client_estimate_inside_interval_total", labels) == 0
        assert value(found, "client_estimate_error_seconds_count", labels) == 0


def test_idle_slots_are_exported_fleet_wide() -> None:
    idle = IdleSlots(slots=2, slot_seconds=7.5, stretch_seconds=1.25, longest_stretch_seconds=4.0)
    found = samples(generate_latest_of(dataclasses.replace(_synthetic_stats(), idle_slots=idle)))
    assert value(found, "idle_slot_seconds_total") == 7.5
    assert value(found, "idle_slots") == 2
    assert value(found, "idle_stretch_seconds") == 1.25
    assert value(found, "longest_idle_stretch_seconds") == 4.0


@pytest.mark.anyio
async def test_a_scraped_scheduler_counts_the_slot_left_free_while_someone_waits() -> None:
    """Two slots held, carol waits: nothing idles. Alice finishes and her slot stays free
    for 4 s until carol comes for it: 4 slot-seconds, one stretch of 4 s."""
    clock = FakeClock()
    scheduler = new_scheduler(clock)
    alice = await grant_of(scheduler, request("alice", "app-2.4.iso"))
    await grant_of(scheduler, request("bob", "dataset.tar"))
    carol = request("carol", "app-2.4.iso")
    await wait_of(scheduler, carol)
    clock.advance(10)
    found = samples((await scrape(metrics_app(scheduler))).text)
    assert value(found, "idle_slot_seconds_total") == 0.0
    await scheduler.report(alice.grant, Delivered(alice.grant.byte_range))
    clock.advance(4)
    found = samples((await scrape(metrics_app(scheduler))).text)
    assert value(found, "idle_slots") == 1
    assert value(found, "idle_slot_seconds_total") == pytest.approx(4.0)
    assert value(found, "idle_stretch_seconds") == pytest.approx(4.0)
    await scheduler.tick()
    await grant_of(scheduler, carol)
    clock.advance(3)
    found = samples((await scrape(metrics_app(scheduler))).text)
    assert value(found, "idle_slots") == 0
    assert value(found, "idle_slot_seconds_total") == pytest.approx(4.0)
    assert value(found, "longest_idle_stretch_seconds") == pytest.approx(4.0)


@pytest.mark.anyio
async def test_stats_cache_holds_the_last_refresh() -> None:
    clock = FakeClock()
    scheduler = new_scheduler(clock)
    cache = StatsCache(scheduler)
    assert cache.latest() is None
    await cache.refresh()
    first = cache.latest()
    assert first is not None
    assert first.active == 0
    await grant_of(scheduler, request("alice", "app-2.4.iso"))
    assert cache.latest() is first  # unchanged until the next refresh
    await cache.refresh()
    latest = cache.latest()
    assert latest is not None
    assert latest.active == 1


# --- the ASGI app and registries -----------------------------------------------------------


@pytest.mark.anyio
async def test_response_is_prometheus_text_format() -> None:
    response = await scrape(metrics_app(new_scheduler(FakeClock())))
    assert response.status_code == 200
    assert response.headers["content-type"] == prometheus_client.CONTENT_TYPE_LATEST
    assert int(response.headers["content-length"]) == len(response.content)


@pytest.mark.anyio
async def test_head_answers_headers_only() -> None:
    app = metrics_app(new_scheduler(FakeClock()))
    response = await scrape(app, "HEAD")
    assert response.status_code == 200
    assert response.content == b""
    assert int(response.headers["content-length"]) == len((await scrape(app)).content)


@pytest.mark.anyio
@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE"])
async def test_other_methods_are_not_allowed(method: str) -> None:
    response = await scrape(metrics_app(new_scheduler(FakeClock())), method)
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, HEAD"


@pytest.mark.anyio
async def test_each_app_has_its_own_registry_by_default() -> None:
    scheduler = new_scheduler(FakeClock())
    first, second = metrics_app(scheduler), metrics_app(scheduler, held=lambda: 4)
    assert value(samples((await scrape(first)).text), "held_requests") == 0
    assert value(samples((await scrape(second)).text), "held_requests") == 4
    assert not any(
        name.startswith(P)
        for name in families(generate_latest(prometheus_client.REGISTRY).decode())
    )


class _Other:
    """Another collector already in an application's registry."""

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily("app_build_info", "Build.", value=1)


@pytest.mark.anyio
async def test_a_given_registry_keeps_its_other_collectors() -> None:
    registry = CollectorRegistry()
    registry.register(_Other())
    app = metrics_app(new_scheduler(FakeClock()), registry=registry)
    parsed = families((await scrape(app)).text)
    assert "app_build_info" in parsed
    assert P + "sessions" in parsed


def test_a_registry_refuses_a_second_scheduler_collector() -> None:
    registry = CollectorRegistry()
    scheduler = new_scheduler(FakeClock())
    metrics_app(scheduler, registry=registry)
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        metrics_app(scheduler, registry=registry)


@pytest.mark.anyio
async def test_lifespan_is_acknowledged() -> None:
    app = metrics_app(new_scheduler(FakeClock()))
    incoming = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    sent: list[str] = []

    async def receive() -> dict[str, str]:
        return incoming.pop(0)

    async def send(message: object) -> None:
        assert isinstance(message, dict)
        sent.append(message["type"])

    await app({"type": "lifespan"}, receive, send)
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]


def _synthetic_stats() -> SchedulerStats:
    """A snapshot built by hand, for collector tests that need values a scheduler
    would take hours to reach."""
    empty = HistogramSnapshot(bounds=(1, 10), counts=(0, 0), count=0, total=0.0)
    return SchedulerStats(
        strategy="ordered",
        admission="session",
        sessions_limit=16,
        per_class={},
        request_active=0,
        request_waiting=0,
        admitted_total=0,
        completed_total=0,
        no_shows_total=0,
        idle_releases_total=0,
        preemptions_total=0,
        rejections_total={},
        estimate_error_seconds=empty,
        last_tick_seconds=0.0,
        delivery_rate=0.0,
        queue_empty_in_seconds=None,
        closed=False,
    )
