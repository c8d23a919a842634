"""Steady-state benchmark of the in-memory scheduler core (``SchedulerCore``).

Run with ``python -m benchmarks.core_bench`` (or ``make bench``); ``--help`` lists the
options and ``benchmarks/README.md`` explains the workload and every figure.

For each queue size the benchmark

1. fills a fresh core under ``tracemalloc`` with plain admissions and reports the traced
   growth per session (the memory figure);
2. builds a second core in a steady state: the same number of downloads arrive over one
   check period (300 s of simulated time, a tick every 0.5 s), every client comes back
   when its answer told it to, active clients fetch ranges at link rate, a few never
   come back and a few stop half-way; then it times ``tick()``, polls and range
   admissions over a measured window;
3. times a plain ``list.sort()`` of as many tuples (what a whole-queue sort per tick
   would cost at that size).

Nothing here reads the core's private state: the driver only calls ``admit``, ``report``
and ``tick`` and looks at the public counters, like a server would.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import math
import os
import platform
import random
import shlex
import statistics
import sys
import time
import tracemalloc
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from arkvory_sched import (
    Admitted,
    ByteRange,
    Delivered,
    DownloadRequest,
    Grant,
    PrincipalKind,
    Queued,
    SchedulerSettings,
    TicketSigner,
    generate_key,
)
from arkvory_sched.memory._core import SchedulerCore
from arkvory_sched.testing import FakeClock
from benchmarks._machine import cpu_count, cpu_model, load_average, median
from benchmarks._report import package_version, verdict, write_section

__all__ = ["main"]

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB

DEFAULT_SIZES = (4_096, 65_536, 1_048_576)
QUICK_SIZES = (4_096, 65_536)
MAX_QUEUE = 1_048_576  # the largest queue_limit the settings accept
QUEUE_HEADROOM = 576  # sessions kept free below queue_limit for actives, paused, no-shows
SESSIONS = 16
QUEUE_PER_PRINCIPAL = 4_096
SESSIONS_PER_PRINCIPAL = 256  # N / 256 principals

STEP = 0.5  # simulated seconds between ticks (the production tick interval)
CHECK_PERIOD = 300.0  # a waiter far back in the queue is told to come back after 300 s
FILL_STEPS = round(CHECK_PERIOD / STEP)  # arrivals spread over one check period
NEWCOMER_STEPS = 4  # a newcomer is told to come back after 2 s
NEAR_HEAD_SECONDS = 299.0  # shorter check delays are followed individually
CHUNK = 40 * MIB  # one range per active client per step: 16 x 40 MiB / 0.5 s = 1.34 GB/s
NO_SHOW_EVERY = 256  # one download in 256 never comes back after arriving
STALL_EVERY = 8  # one activated client in 8 stops after its first range (idle slot)
WARMUP_TICKS = 4
TICKS = 60
QUICK_TICKS = 20
SORT_REPEATS = 3

TICK_TARGETS_MS = {65_536: 2.0, 1_048_576: 10.0}
POLL_TARGET_US = 50.0
POLL_TARGET_SIZE = 1_048_576
RANGE_TARGET_US = 10.0
MEMORY_TARGET_BYTES = 1 * KIB
SORT_TARGET_RATIO = 15.0
GROWTH_SHARE = 0.1  # "far slower": the tick grows by at most a tenth of the queue's growth

_KINDS = (PrincipalKind.PERSON, PrincipalKind.SERVICE, PrincipalKind.SERVICE, PrincipalKind.LINK)
# requested_class by a download's turn within its principal: 5/8 none, 2/8 bulk, 1/8 background
_REQUESTED: tuple[str | None, ...] = (None, None, None, None, None, "bulk", "bulk", "background")

_ACTIVE, _STALLED, _DONE, _REQUEUED = 1, 2, 3, 4

RESULTS_PATH = Path(__file__).resolve().parent / "RESULTS.md"
SECTION_HEADING = "## Scheduler core"


# ====================================================================== workload
def queue_limit_for(size: int) -> int:
    return min(MAX_QUEUE, max(math.ceil(size * 1.1), size + QUEUE_HEADROOM))


def waiting_target_for(size: int) -> int:
    return min(size, queue_limit_for(size) - QUEUE_HEADROOM)


def settings_for(size: int) -> SchedulerSettings:
    return SchedulerSettings(
        sessions=SESSIONS,
        queue_limit=queue_limit_for(size),
        queue_per_principal=QUEUE_PER_PRINCIPAL,
    )


def object_size(index: int) -> int:
    """1 GiB to 4 GiB, spread by a multiplicative hash of the download's index."""
    return GIB + (index * 2_654_435_761) % (3 * GIB)


def is_no_show(index: int) -> bool:
    return index % NO_SHOW_EVERY == NO_SHOW_EVERY // 2


class Workload:
    """Download ``index`` -> request; nothing is stored per download."""

    __slots__ = ("_names", "fill", "principals")

    def __init__(self, fill: int) -> None:
        self.fill = fill
        self.principals = max(4, fill // SESSIONS_PER_PRINCIPAL)
        self._names = [f"principal-{p}" for p in range(self.principals)]

    def arrivals(self, step: int) -> range:
        """Fill downloads arriving at fill step ``step`` (1 .. FILL_STEPS)."""
        return range(
            (step - 1) * self.fill // FILL_STEPS,
            step * self.fill // FILL_STEPS,
        )

    def request(self, index: int, start: int = 0) -> DownloadRequest:
        principal = index % self.principals
        size = object_size(index)
        return DownloadRequest(
            principal=self._names[principal],
            principal_kind=_KINDS[principal % len(_KINDS)],
            object_id=f"artifact-{index % 8192}",
            object_size=size,
            byte_range=ByteRange(start, min(start + CHUNK, size)),
            download_id=f"dl-{index:x}",
            requested_class=_REQUESTED[(index // self.principals) % len(_REQUESTED)],
        )


def new_core(size: int) -> tuple[SchedulerCore, FakeClock]:
    clock = FakeClock()
    return SchedulerCore(settings_for(size), clock, TicketSigner([generate_key()])), clock


# ====================================================================== results
@dataclass(slots=True)
class MemoryResult:
    sessions: int
    growth_bytes: int
    peak_bytes: int
    seconds: float

    @property
    def per_session(self) -> float:
        return self.growth_bytes / self.sessions

    @property
    def peak_per_session(self) -> float:
        return self.peak_bytes / self.sessions


@dataclass(slots=True)
class SizeResult:
    size: int
    target: int
    queue_limit: int
    principals: int
    fill_seconds: float = 0.0
    fill_tick_ms: list[float] = field(default_factory=list)
    tick_ms: list[float] = field(default_factory=list)
    waiting_seen: list[int] = field(default_factory=list)
    poll_us: list[float] = field(default_factory=list)
    start_us: list[float] = field(default_factory=list)
    range_us: list[float] = field(default_factory=list)
    arrival_us: list[float] = field(default_factory=list)
    report_us: list[float] = field(default_factory=list)
    expired: int = 0
    idle_released: int = 0
    promoted: int = 0
    marked: int = 0
    preempted: int = 0
    completed: int = 0
    yielded: int = 0
    rejoined: int = 0
    refused: int = 0
    rss_per_session: float | None = None
    sort_random_ms: float = math.nan
    sort_sorted_ms: float = math.nan
    memory: MemoryResult | None = None

    @property
    def tick_median(self) -> float:
        return statistics.median(self.tick_ms)


def quantile(values: Sequence[float], q: float) -> float:
    """Nearest-rank quantile; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = min(len(ordered), max(1, math.ceil(q * len(ordered))))
    return ordered[rank - 1]


# ====================================================================== steady state
@dataclass(slots=True)
class _Client:
    index: int
    grant: Grant
    offset: int  # first byte not yet requested
    size: int
    stalls: bool


class SteadyRun:
    """Drives one core through arrivals, polls, range traffic and ticks on a FakeClock."""

    def __init__(self, size: int, ticks: int) -> None:
        self.size = size
        self.ticks = ticks
        self.target = waiting_target_for(size)
        self.workload = Workload(self.target)
        self.core, self.clock = new_core(size)
        self.origin = self.clock.monotonic()
        self.wall_offset = self.clock.wall() - self.clock.monotonic()
        self.step = 0
        self.next_index = self.target  # downloads arriving after the fill
        self.calendar: dict[int, list[int]] = {}
        self.next_check: dict[int, int] = {}
        self.status: dict[int, int] = {}
        self.resume_at: dict[int, int] = {}
        self.clients: dict[int, _Client] = {}
        self.activations = 0
        self.measuring = False
        self.polls_measured = 0
        self.result = SizeResult(
            size=size,
            target=self.target,
            queue_limit=queue_limit_for(size),
            principals=self.workload.principals,
        )

    # ---------------------------------------------------------------- phases
    def run(self) -> SizeResult:
        result = self.result
        gc.collect()
        rss_before = resident_bytes()
        gc.disable()  # the fill allocates millions of long-lived objects; see README
        started = time.perf_counter()
        for step in range(1, FILL_STEPS + 1):
            result.fill_tick_ms.append(1000 * self.advance(self.workload.arrivals(step)))
        result.fill_seconds = time.perf_counter() - started
        gc.collect()
        gc.freeze()
        gc.enable()
        rss_after = resident_bytes()
        if rss_before is not None and rss_after is not None:
            result.rss_per_session = (rss_after - rss_before) / max(1, self.core.session_count)
        for _ in range(WARMUP_TICKS):
            self.advance(None)
        self.measuring = True
        for _ in range(self.ticks):
            result.tick_ms.append(1000 * self.advance(None))
            result.waiting_seen.append(self.core.waiting_count)
        self.measuring = False
        return result

    def close(self) -> None:
        """Drop everything and give the frozen objects back to the collector."""
        self.calendar.clear()
        self.clients.clear()
        del self.core
        gc.unfreeze()
        gc.collect()

    def advance(self, arrivals: range | None) -> float:
        """One step: arrivals, polls that are due, range traffic, then a timed tick."""
        self.clock.advance(STEP)
        self.step += 1
        if arrivals is None:
            self.top_up(self.target)
        else:
            for index in arrivals:
                self.arrive(index)
            self.top_up(arrivals.stop)
        self.periodic_polls()
        self.calendar_polls()
        self.serve_clients()
        started = time.perf_counter()
        outcome = self.core.tick()
        elapsed = time.perf_counter() - started
        if self.measuring:
            result = self.result
            result.expired += outcome.expired
            result.idle_released += outcome.idle_released
            result.promoted += outcome.promoted
            result.marked += outcome.marked
            result.preempted += outcome.preempted
        return elapsed

    # ---------------------------------------------------------------- clients
    def arrive(self, index: int) -> None:
        request = self.workload.request(index)
        started = time.perf_counter_ns()
        decision = self.core.admit(request)
        elapsed = time.perf_counter_ns() - started
        if self.measuring:
            self.result.arrival_us.append(elapsed / 1000)
        if isinstance(decision, Admitted):
            self.start_client(index, decision.grant, 0)
        elif isinstance(decision, Queued):
            # Fill downloads come back on the periodic schedule; later ones individually.
            if index >= self.target and not is_no_show(index):
                self.schedule(index, decision.check_at)
        else:
            self.result.refused += 1

    def top_up(self, expected: int) -> None:
        """Replace departures (slots taken, completions, no-shows) so that ``expected``
        downloads wait: the number that arrived so far during the fill, then the target."""
        core = self.core
        room = core.settings.queue_limit - core.session_count - 8
        count = min(expected - core.waiting_count, room, math.ceil(self.target / FILL_STEPS))
        for _ in range(max(0, count)):
            index = self.next_index
            self.next_index += 1
            self.arrive(index)

    def periodic_polls(self) -> None:
        """Fill downloads come back 2 s after arriving, then every 300 s (their answer)."""
        fill_step = self.step - NEWCOMER_STEPS
        while fill_step >= 1:
            if fill_step <= FILL_STEPS:
                status = self.status
                for index in self.workload.arrivals(fill_step):
                    if index not in status and not is_no_show(index):
                        self.poll(index)
            fill_step -= FILL_STEPS

    def calendar_polls(self) -> None:
        """Clients told to come back sooner than 300 s, and downloads after the fill."""
        due = self.calendar.pop(self.step, None)
        if not due:
            return
        for index in due:
            if self.next_check.get(index) != self.step:
                continue  # rescheduled by a later answer
            del self.next_check[index]
            state = self.status.get(index)
            if state is None or state == _REQUEUED:
                self.poll(index)

    def schedule(self, index: int, check_at_wall: float) -> None:
        check_at = check_at_wall - self.wall_offset
        step = max(self.step + 1, math.ceil((check_at - self.origin) / STEP - 1e-9))
        self.next_check[index] = step
        self.calendar.setdefault(step, []).append(index)

    def poll(self, index: int) -> None:
        """A waiting client comes back with the same request."""
        start = self.resume_at.get(index, 0)
        request = self.workload.request(index, start)
        started = time.perf_counter_ns()
        decision = self.core.admit(request)
        elapsed = time.perf_counter_ns() - started
        result = self.result
        if isinstance(decision, Queued):
            if decision.position is None:
                result.rejoined += 1  # the core had forgotten it: a driver error
            elif self.measuring:
                result.poll_us.append(elapsed / 1000)
            delay = decision.check_at - self.clock.wall()
            if index >= self.target or index in self.status or delay < NEAR_HEAD_SECONDS:
                self.schedule(index, decision.check_at)
            else:
                self.next_check.pop(index, None)
        elif isinstance(decision, Admitted):
            if self.measuring:
                result.start_us.append(elapsed / 1000)
            self.resume_at.pop(index, None)
            self.start_client(index, decision.grant, start)
        else:
            result.refused += 1

    def start_client(self, index: int, grant: Grant, start: int) -> None:
        self.activations += 1
        size = object_size(index)
        self.next_check.pop(index, None)
        self.status[index] = _ACTIVE
        self.clients[index] = _Client(
            index=index,
            grant=grant,
            offset=min(start + CHUNK, size),
            size=size,
            stalls=self.activations % STALL_EVERY == 0,
        )

    def serve_clients(self) -> None:
        """Each active client's range was sent in full; it asks for the next one."""
        core = self.core
        result = self.result
        measuring = self.measuring
        for client in list(self.clients.values()):
            index = client.index
            delivered = Delivered(client.grant.byte_range)
            started = time.perf_counter_ns()
            core.report(client.grant, delivered)
            elapsed = time.perf_counter_ns() - started
            if measuring:
                result.report_us.append(elapsed / 1000)
            if client.offset >= client.size:
                result.completed += measuring
                self.status[index] = _DONE
                del self.clients[index]
                continue
            if client.stalls:
                self.status[index] = _STALLED  # holds the slot idle until released
                del self.clients[index]
                continue
            request = self.workload.request(index, client.offset)
            started = time.perf_counter_ns()
            decision = core.admit(request)
            elapsed = time.perf_counter_ns() - started
            if isinstance(decision, Admitted):
                if measuring:
                    result.range_us.append(elapsed / 1000)
                client.grant = decision.grant
                client.offset = min(client.offset + CHUNK, client.size)
            elif isinstance(decision, Queued):
                # Asked to yield its slot (R-PREEMPT): it waits again from its offset.
                result.yielded += measuring
                self.status[index] = _REQUEUED
                self.resume_at[index] = client.offset
                del self.clients[index]
                self.schedule(index, decision.check_at)
            else:
                result.refused += 1
                self.status[index] = _DONE
                del self.clients[index]


# ====================================================================== memory, sort
def measure_memory(size: int) -> MemoryResult:
    """Traced growth while ``waiting_target_for(size)`` downloads arrive (no ticks, no polls)."""
    target = waiting_target_for(size)
    workload = Workload(target)
    core, clock = new_core(size)
    gc.collect()
    gc.disable()
    tracemalloc.start()
    baseline, _ = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    started = time.perf_counter()
    for step in range(1, FILL_STEPS + 1):
        clock.advance(STEP)
        for index in workload.arrivals(step):
            core.admit(workload.request(index))
    seconds = time.perf_counter() - started
    gc.collect()
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    gc.enable()
    sessions = core.session_count
    del core
    gc.collect()
    return MemoryResult(sessions, current - baseline, peak - baseline, seconds)


def measure_sort(count: int, rng: random.Random) -> tuple[float, float]:
    """Median ms of ``list.sort()`` of ``count`` queue-like tuples: random order, sorted."""
    items = [
        (rng.randrange(4), float(rng.randrange(count)), rng.random() * CHECK_PERIOD, seq)
        for seq in range(count)
    ]
    random_ms: list[float] = []
    for _ in range(SORT_REPEATS):
        copy = items.copy()
        started = time.perf_counter()
        copy.sort()
        random_ms.append(1000 * (time.perf_counter() - started))
    items.sort()
    sorted_ms: list[float] = []
    for _ in range(SORT_REPEATS):
        copy = items.copy()
        started = time.perf_counter()
        copy.sort()
        sorted_ms.append(1000 * (time.perf_counter() - started))
    return statistics.median(random_ms), statistics.median(sorted_ms)


# ====================================================================== machine
def resident_bytes() -> int | None:
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            pages = int(statm.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE")


# ====================================================================== report
def _ms(value: float) -> str:
    return "–" if math.isnan(value) else f"{value:.3f} ms"


def _us(value: float) -> str:
    return "–" if math.isnan(value) else f"{value:.1f} µs"


def _by_size(results: Sequence[SizeResult], size: int) -> SizeResult | None:
    return next((r for r in results if r.size == size), None)


def target_rows(results: Sequence[SizeResult]) -> list[str]:
    rows = ["| Target | Measured | Result |", "| --- | --- | --- |"]
    for size, limit in TICK_TARGETS_MS.items():
        found = _by_size(results, size)
        if found is None:
            rows.append(f"| median tick ≤ {limit:g} ms at {size:,} waiting | not run | – |")
            continue
        rows.append(
            f"| median tick ≤ {limit:g} ms at {size:,} waiting | {_ms(found.tick_median)} "
            f"| {verdict(found.tick_median <= limit)} |"
        )
    ratios = [(r.sort_random_ms / r.tick_median, r.size) for r in results]
    worst, worst_size = min(ratios)
    rows.append(
        f"| tick ≥ {SORT_TARGET_RATIO:g}× faster than `list.sort()` of as many tuples "
        f"(random order), every size | lowest {worst:,.0f}× (at {worst_size:,}) "
        f"| {verdict(worst >= SORT_TARGET_RATIO)} |"
    )
    smallest, largest = min(results, key=lambda r: r.size), max(results, key=lambda r: r.size)
    if largest.size > smallest.size:
        queue_growth = largest.target / smallest.target
        tick_growth = largest.tick_median / smallest.tick_median
        allowed = GROWTH_SHARE * queue_growth
        rows.append(
            f"| tick grows far slower than the queue: median tick growth ≤ "
            f"{GROWTH_SHARE:g} × queue growth ({smallest.size:,} → {largest.size:,}: "
            f"≤ {allowed:.1f}×) | tick {tick_growth:.1f}× for a queue {queue_growth:.0f}× "
            f"| {verdict(tick_growth <= allowed)} |"
        )
    big = _by_size(results, POLL_TARGET_SIZE)
    if big is None:
        rows.append(f"| poll ≤ {POLL_TARGET_US:g} µs median at {POLL_TARGET_SIZE:,} | not run | |")
    else:
        poll = median(big.poll_us)
        rows.append(
            f"| waiting client's poll ≤ {POLL_TARGET_US:g} µs median at "
            f"{POLL_TARGET_SIZE:,} waiting | {_us(poll)} | {verdict(poll <= POLL_TARGET_US)} |"
        )
    range_worst = max((median(r.range_us), r.size) for r in results)
    rows.append(
        f"| range admission of an active session ≤ {RANGE_TARGET_US:g} µs median, every size "
        f"| highest {_us(range_worst[0])} (at {range_worst[1]:,}) "
        f"| {verdict(range_worst[0] <= RANGE_TARGET_US)} |"
    )
    measured = [r.memory for r in results if r.memory is not None]
    if measured:
        heaviest = max(measured, key=lambda m: m.per_session)
        rows.append(
            f"| memory ≤ 1 KiB (1,024 B) per waiting session, every size "
            f"| highest {heaviest.per_session:,.0f} B (at {heaviest.sessions:,} sessions) "
            f"| {verdict(heaviest.per_session <= MEMORY_TARGET_BYTES)} |"
        )
    else:
        rows.append("| memory ≤ 1 KiB per waiting session | not run | – |")
    return rows


def render(
    results: Sequence[SizeResult],
    argv: Sequence[str],
    ticks: int,
    wall: float,
    loads: tuple[str, str],
) -> str:
    now = datetime.datetime.now(datetime.UTC)
    command = shlex.join(["python", "-m", "benchmarks.core_bench", *argv])
    lines = [
        SECTION_HEADING,
        "",
        f"- Command: `{command}` (from the project root, in `.venv`)",
        f"- Machine: {cpu_count()} CPUs (`nproc`), {cpu_model()}, "
        f"{platform.system()} {platform.release()}",
        f"- Python: {platform.python_implementation()} {platform.python_version()}, "
        f"sortedcontainers {package_version('sortedcontainers')}, "
        f"itsdangerous {package_version('itsdangerous')}",
        f"- Date: {now:%Y-%m-%d %H:%M} UTC; whole run {wall:.0f} s; load average "
        f"(1 / 5 / 15 min) {loads[0]} before, {loads[1]} after",
        f"- Settings: sessions={SESSIONS} (derived reserve=1, per_principal=4), "
        f"queue_per_principal={QUEUE_PER_PRINCIPAL:,}, "
        f"queue_limit=min(1,048,576, max(⌈1.1·N⌉, N+{QUEUE_HEADROOM})), "
        "strategy ordered, aging 10 min, preempt on, tickets on (`TicketSigner([generate_key()])`)",
        f"- Steady state: {ticks} measured ticks (after {WARMUP_TICKS} warm-up ticks) every "
        f"{STEP} s of `FakeClock` time; see `benchmarks/README.md` for the workload",
        "",
        "### Targets",
        "",
        *target_rows(results),
        "",
        "### Tick",
        "",
        "| waiting | ticks | median | p90 | max | median vs previous size "
        "| list.sort() random | ratio | list.sort() presorted | ratio "
        "| expired / marked / promoted per tick |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    previous: SizeResult | None = None
    for r in results:
        count = len(r.tick_ms)
        growth = "–"
        if previous is not None:
            growth = (
                f"{r.tick_median / previous.tick_median:.1f}× "
                f"(queue {r.target / previous.target:.0f}×)"
            )
        previous = r
        lines.append(
            f"| {min(r.waiting_seen):,}–{max(r.waiting_seen):,} | {count} "
            f"| {_ms(r.tick_median)} | {_ms(quantile(r.tick_ms, 0.9))} | {_ms(max(r.tick_ms))} "
            f"| {growth} "
            f"| {_ms(r.sort_random_ms)} | {r.sort_random_ms / r.tick_median:,.0f}× "
            f"| {_ms(r.sort_sorted_ms)} | {r.sort_sorted_ms / r.tick_median:,.1f}× "
            f"| {r.expired / count:.1f} / {r.marked / count:.1f} / {r.promoted / count:.1f} |"
        )
    lines += [
        "",
        "### Admission and delivery (per call, measured window)",
        "",
        "| waiting | polls/tick | poll median | poll p99 | range admit median | range admit p99 "
        "| new download median | report median | poll → slot median |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        lines.append(
            f"| {r.target:,} | {len(r.poll_us) / len(r.tick_ms):,.0f} "
            f"| {_us(median(r.poll_us))} | {_us(quantile(r.poll_us, 0.99))} "
            f"| {_us(median(r.range_us))} | {_us(quantile(r.range_us, 0.99))} "
            f"| {_us(median(r.arrival_us))} | {_us(median(r.report_us))} "
            f"| {_us(median(r.start_us))} |"
        )
    lines += [
        "",
        "### Memory (tracemalloc, plain fill)",
        "",
        "| sessions | traced growth | per session | traced peak | peak per session "
        "| fill time (traced) | RSS growth per session (steady-state fill, untraced) |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        m = r.memory
        rss = "–" if r.rss_per_session is None else f"{r.rss_per_session:,.0f} B"
        if m is None:
            lines.append(f"| {r.target:,} | not run | | | | | {rss} |")
            continue
        lines.append(
            f"| {m.sessions:,} | {m.growth_bytes / MIB:,.1f} MiB | {m.per_session:,.0f} B "
            f"| {m.peak_bytes / MIB:,.1f} MiB | {m.peak_per_session:,.0f} B "
            f"| {m.seconds:.1f} s | {rss} |"
        )
    lines += [
        "",
        "### Run details",
        "",
        "| waiting | queue_limit | principals | steady fill (untraced) "
        "| fill ticks median / max "
        "| polls timed | range admits timed | completed | yielded | preempted "
        "| idle released | refused | rejoined |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: |",
    ]
    for r in results:
        lines.append(
            f"| {r.target:,} | {r.queue_limit:,} | {r.principals:,} | {r.fill_seconds:.1f} s "
            f"| {_ms(median(r.fill_tick_ms))} / {_ms(max(r.fill_tick_ms))} "
            f"| {len(r.poll_us):,} | {len(r.range_us):,} | {r.completed} | {r.yielded} "
            f"| {r.preempted} | {r.idle_released} | {r.refused} | {r.rejoined} |"
        )
    lines += [
        "",
        "The garbage collector is disabled while a queue is filled; after the fill the "
        "benchmark runs `gc.collect()` and `gc.freeze()` and re-enables it, so the measured "
        "window runs with the collector on but without rescanning the filled queue. "
        "`refused` and `rejoined` must be 0 (they would mean the driver lost track of a "
        "download).",
        "",
    ]
    return "\n".join(lines)


# ====================================================================== main
def parse_sizes(text: str) -> tuple[int, ...]:
    sizes = tuple(sorted({int(part.replace("_", "")) for part in text.split(",") if part}))
    if not sizes or any(size < 64 or size > MAX_QUEUE for size in sizes):
        raise argparse.ArgumentTypeError(f"sizes must be between 64 and {MAX_QUEUE:,}")
    return sizes


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.core_bench",
        description="Steady-state benchmark of the in-memory scheduler core.",
    )
    parser.add_argument(
        "--sizes",
        type=parse_sizes,
        default=None,
        help="comma-separated waiting-queue sizes (default 4096,65536,1048576; "
        "with --quick 4096,65536)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"{QUICK_TICKS} measured ticks, small sizes, print only (unless --output)",
    )
    parser.add_argument("--ticks", type=int, default=None, help="measured ticks per size")
    parser.add_argument(
        "--no-memory", action="store_true", help="skip the tracemalloc fill (the slow part)"
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help="markdown file to update (default benchmarks/RESULTS.md, none with --quick)",
    )
    parser.add_argument("--seed", type=int, default=20_240_601, help="seed of the sort data")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(args_list)
    sizes: tuple[int, ...] = args.sizes or (QUICK_SIZES if args.quick else DEFAULT_SIZES)
    ticks: int = args.ticks or (QUICK_TICKS if args.quick else TICKS)
    output: Path | None = args.output or (None if args.quick else RESULTS_PATH)
    rng = random.Random(args.seed)
    load_before = load_average()
    started = time.perf_counter()
    results: list[SizeResult] = []
    for size in sizes:
        memory = None
        if not args.no_memory:
            print(f"[{size:,}] tracemalloc fill …", file=sys.stderr, flush=True)
            memory = measure_memory(size)
            print(
                f"[{size:,}]   {memory.per_session:,.0f} B/session "
                f"(peak {memory.peak_per_session:,.0f} B) in {memory.seconds:.1f} s",
                file=sys.stderr,
                flush=True,
            )
        print(f"[{size:,}] steady state …", file=sys.stderr, flush=True)
        run = SteadyRun(size, ticks)
        result = run.run()
        run.close()
        result.memory = memory
        result.sort_random_ms, result.sort_sorted_ms = measure_sort(result.target, rng)
        print(
            f"[{size:,}]   fill {result.fill_seconds:.1f} s, median tick "
            f"{_ms(result.tick_median)}, poll {_us(median(result.poll_us))}, range admit "
            f"{_us(median(result.range_us))}, sort {_ms(result.sort_random_ms)}",
            file=sys.stderr,
            flush=True,
        )
        results.append(result)
    wall = time.perf_counter() - started
    section = render(results, args_list, ticks, wall, (load_before, load_average()))
    print(section)
    if output is not None:
        write_section(output, SECTION_HEADING, section)
        print(f"written to {output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
