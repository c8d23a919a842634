"""The core benchmark's workload and its driver: who arrives, when each client comes
back, and what a measured window records (``core_bench`` judges and reports it).

Every request is a pure function of a download's index, so nothing is stored per
download outside the core: its memory is what one of the figures measures.
"""

from __future__ import annotations

import gc
import math
import time
import tracemalloc
from dataclasses import dataclass, field

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

__all__ = ["MAX_QUEUE", "SESSIONS", "STEP", "SizeResult", "SteadyRun", "measure_memory"]

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
class SizeResult:
    size: int
    target: int  # the downloads kept waiting: the size, less headroom at the largest
    tick_ms: list[float] = field(default_factory=list)
    poll_us: list[float] = field(default_factory=list)
    range_us: list[float] = field(default_factory=list)
    arrival_us: list[float] = field(default_factory=list)
    rejoined: int = 0
    refused: int = 0
    memory: float | None = None  # traced bytes per waiting session


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
        self.result = SizeResult(size=size, target=self.target)

    # ---------------------------------------------------------------- phases
    def run(self) -> SizeResult:
        result = self.result
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
            result.tick_ms.append(1000 * self.advance(None))
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
        self.core.tick()
        return time.perf_counter() - started

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


# ====================================================================== memory
def measure_memory(size: int) -> float:
    """Traced bytes per session while ``waiting_target_for(size)`` downloads arrive (no
    ticks, no polls)."""
    target = waiting_target_for(size)
    workload = Workload(target)
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
