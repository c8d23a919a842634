"""The in-memory scheduler core (``SchedulerCore``) in a steady state at growing queue
sizes: ``python -m benchmarks.core_bench`` (``make bench``) or ``--quick``.

The figures are judged as growth from the smallest size to the largest: both ends run in
one process minutes apart, so the shared machine's load falls on both, and a cost that
grows with the queue cannot hide behind a fast machine. The driver only calls ``admit``,
``report`` and ``tick`` and reads the public counters, as a server would; every request
is a function of a download's index, so nothing is stored per download outside the core,
whose memory is one of the figures. ``benchmarks/README.md`` explains the workload.
"""

from __future__ import annotations

import argparse
import gc
import math
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import version
from statistics import median
from typing import Final, NamedTuple

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
from benchmarks._machine import load_average
from benchmarks._report import header, quantile, verdict, write_section

SIZES: Final = (4_096, 65_536, 1_048_576)
QUICK_SIZES: Final = (4_096, 65_536)
TICKS: Final = 60
QUICK_TICKS: Final = 20
HEADING: Final = "## Scheduler core"

# The absolute targets, shown beside the growth at the largest size.
TICK_TARGETS_MS: Final = {65_536: 2.0, 1_048_576: 10.0}
POLL_TARGET_US: Final = 50.0
RANGE_TARGET_US: Final = 10.0
MEMORY_TARGET_BYTES: Final = 1024
# A logarithmic cost grows 20/12 = 1.67x from 4,096 to 1,048,576; 2x allows no more.
LOG_GROWTH: Final = 2.0
# "Far slower than the queue": the tick grows by at most a tenth of the queue's growth, or
# as a logarithm may over a short span (a tick's expiry work here is about N/600 entries).
GROWTH_SHARE: Final = 0.1
FLAT_GROWTH: Final = 1.25  # memory per session: flat in the queue's length

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB
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

_KINDS = (PrincipalKind.PERSON, PrincipalKind.SERVICE, PrincipalKind.SERVICE, PrincipalKind.LINK)
# requested_class by a download's turn within its principal: 5/8 none, 2/8 bulk, 1/8 background
_REQUESTED: tuple[str | None, ...] = (None, None, None, None, None, "bulk", "bulk", "background")

_ACTIVE, _STALLED, _DONE, _REQUEUED = 1, 2, 3, 4


# ====================================================================== workload
def queue_limit_for(size: int) -> int:
    return min(MAX_QUEUE, max(math.ceil(size * 1.1), size + QUEUE_HEADROOM))


def waiting_target_for(size: int) -> int:
    return min(size, queue_limit_for(size) - QUEUE_HEADROOM)


def new_core(size: int) -> tuple[SchedulerCore, FakeClock]:
    settings = SchedulerSettings(
        sessions=SESSIONS,
        queue_limit=queue_limit_for(size),
        queue_per_principal=QUEUE_PER_PRINCIPAL,
    )
    clock = FakeClock()
    return SchedulerCore(settings, clock, TicketSigner([generate_key()])), clock


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
        return range((step - 1) * self.fill // FILL_STEPS, step * self.fill // FILL_STEPS)

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


@dataclass(slots=True)
class SizeResult:
    size: int
    target: int  # the downloads kept waiting: the size, less headroom at the largest
    tick_ms: list[float] = field(default_factory=list)
    poll_us: list[float] = field(default_factory=list)
    range_us: list[float] = field(default_factory=list)
    arrival_us: list[float] = field(default_factory=list)
    rejoined: int = 0
    refused: int = 0
    memory: float = math.nan  # traced bytes per waiting session


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
        self.result = SizeResult(size=size, target=self.target)

    def run(self) -> SizeResult:
        """Fill, warm up, then time the ticks. The filled queue stays frozen out of the
        collector: the caller unfreezes it once this run is dropped."""
        gc.collect()
        gc.disable()  # the fill allocates millions of long-lived objects; see README
        for step in range(1, FILL_STEPS + 1):
            self.advance(self.workload.arrivals(step))
        gc.collect()
        gc.freeze()
        gc.enable()
        for _ in range(WARMUP_TICKS):
            self.advance(None)
        self.measuring = True
        for _ in range(self.ticks):
            self.result.tick_ms.append(1000 * self.advance(None))
        return self.result

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
        self.core.tick()
        return time.perf_counter() - started

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
            core.report(client.grant, Delivered(client.grant.byte_range))
            if client.offset >= client.size:
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
                self.status[index] = _REQUEUED
                self.resume_at[index] = client.offset
                del self.clients[index]
                self.schedule(index, decision.check_at)
            else:
                result.refused += 1
                self.status[index] = _DONE
                del self.clients[index]


def measure_memory(size: int) -> float:
    """Traced bytes per session while ``waiting_target_for(size)`` downloads arrive (no
    ticks, no polls)."""
    workload = Workload(waiting_target_for(size))
    core, clock = new_core(size)
    gc.collect()
    gc.disable()
    tracemalloc.start()
    baseline, _ = tracemalloc.get_traced_memory()
    for step in range(1, FILL_STEPS + 1):
        clock.advance(STEP)
        for index in workload.arrivals(step):
            core.admit(workload.request(index))
    gc.collect()
    current, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    gc.enable()
    sessions = core.session_count
    del core
    gc.collect()
    return (current - baseline) / sessions


# ====================================================================== judging
def _ms(value: float) -> str:
    return f"{value:.3f} ms"


def _us(value: float) -> str:
    return f"{value:.1f} µs"


def _bytes(value: float) -> str:
    return f"{value:,.0f} B"


class Scaling(NamedTuple):
    """One figure at the smallest and the largest size, and how much it may grow."""

    name: str
    smallest: float
    largest: float
    limit: float
    target: float  # the absolute target at the largest size
    show: Callable[[float], str]

    @property
    def growth(self) -> float:
        return self.largest / self.smallest

    @property
    def ok(self) -> bool:
        return self.growth <= self.limit

    def row(self) -> str:
        met = "met" if self.largest <= self.target else "**not met**"
        return (
            f"| {self.name} | {self.show(self.smallest)} | {self.show(self.largest)} "
            f"| {self.growth:.2f}× (≤ {self.limit:.2f}×) | {verdict(self.ok)} "
            f"| ≤ {self.show(self.target)}: {met} |"
        )


def scalings(results: Sequence[SizeResult]) -> list[Scaling]:
    """The four figures, from the smallest size of the run to its largest."""
    small, large = results[0], results[-1]
    tick_limit = max(LOG_GROWTH, GROWTH_SHARE * large.target / small.target)
    tick_target = TICK_TARGETS_MS.get(large.size, max(TICK_TARGETS_MS.values()))
    ticks = median(small.tick_ms), median(large.tick_ms)
    polls = median(small.poll_us), median(large.poll_us)
    ranges = median(small.range_us), median(large.range_us)
    return [
        Scaling("median tick", *ticks, tick_limit, tick_target, _ms),
        Scaling("waiting client's poll, median", *polls, LOG_GROWTH, POLL_TARGET_US, _us),
        Scaling(
            "range admission of an active session, median",
            *ranges,
            LOG_GROWTH,
            RANGE_TARGET_US,
            _us,
        ),
        Scaling(
            "memory per waiting session",
            small.memory,
            large.memory,
            FLAT_GROWTH,
            MEMORY_TARGET_BYTES,
            _bytes,
        ),
    ]


def problems(results: Sequence[SizeResult]) -> list[str]:
    """Why the run fails: a figure grew too much, or the driver lost track of a download."""
    found = [
        f"{s.name} grew {s.growth:.2f}× (≤ {s.limit:.2f}×)" for s in scalings(results) if not s.ok
    ]
    for r in results:
        if r.refused or r.rejoined:
            found.append(f"{r.size:,}: {r.refused} refused, {r.rejoined} rejoined (must be 0)")
    return found


def render(results: Sequence[SizeResult], argv: Sequence[str], ticks: int, load_before: str) -> str:
    small, large = results[0], results[-1]
    lines = [
        HEADING,
        "",
        *header("core_bench", argv, f"sortedcontainers {version('sortedcontainers')}", load_before),
        f"- Workload: sessions={SESSIONS}, tickets on, {ticks} measured ticks every {STEP} s "
        "of `FakeClock` time after a fill over 300 s (benchmarks/README.md)",
        "",
        f"| figure | at {small.target:,} | at {large.target:,} | growth (limit) | result "
        f"| absolute target at {large.size:,} |",
        "| --- | ---: | ---: | ---: | --- | --- |",
        *(s.row() for s in scalings(results)),
        "",
        "| waiting | tick median / p90 / max | poll median / p99 | range admission median / p99 "
        "| newcomer median | memory per session (traced) | refused / rejoined |",
        "| ---: | --- | --- | --- | ---: | ---: | --- |",
    ]
    for r in results:
        lines.append(
            f"| {r.target:,} | {_ms(median(r.tick_ms))} / {_ms(quantile(r.tick_ms, 0.9))} / "
            f"{_ms(max(r.tick_ms))} | {_us(median(r.poll_us))} / "
            f"{_us(quantile(r.poll_us, 0.99))} | {_us(median(r.range_us))} / "
            f"{_us(quantile(r.range_us, 0.99))} | {_us(median(r.arrival_us))} "
            f"| {_bytes(r.memory)} | {r.refused} / {r.rejoined} |"
        )
    return "\n".join([*lines, ""])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.core_bench")
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"sizes {QUICK_SIZES}, {QUICK_TICKS} measured ticks, print only",
    )
    argv = list(sys.argv[1:] if argv is None else argv)
    quick = parser.parse_args(argv).quick
    ticks = QUICK_TICKS if quick else TICKS
    load_before = load_average()
    results = []
    for size in QUICK_SIZES if quick else SIZES:
        memory = measure_memory(size)
        result = SteadyRun(size, ticks).run()
        gc.unfreeze()  # the run is dropped: give its queue back to the collector
        gc.collect()
        result.memory = memory
        print(
            f"[{size:,}] median tick {_ms(median(result.tick_ms))}, poll "
            f"{_us(median(result.poll_us))}, range admission {_us(median(result.range_us))}, "
            f"{_bytes(memory)} per session",
            file=sys.stderr,
            flush=True,
        )
        results.append(result)
    section = render(results, argv, ticks, load_before)
    print(section)
    if not quick:
        write_section(section)
    found = problems(results)
    for problem in found:
        print(f"problem: {problem}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
