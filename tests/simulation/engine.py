"""A deterministic discrete-event simulation of a mass update, driven through the port.

The simulated world:

* one link of ``bandwidth`` bytes/s shared equally by every response in flight
  (processor sharing: with ``n`` responses each advances at ``bandwidth / n``);
* protocol clients that read their object in 8 MiB ranges with an
  ``Arkvory-Download-Id``, come back when ``Retry-After`` says (plus a little jitter),
  and return the last ticket they got;
* the scheduler under test, on a :class:`FakeClock` that jumps from event to event, with
  a tick every 500 ms and progress reports for in-flight responses on each tick.

Nothing here sleeps: a 20-minute mass update runs in seconds, and the same seed gives
the same run.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio
import anyio.abc
import anyio.lowlevel

from arkvory_sched import (
    Admitted,
    ByteRange,
    Delivered,
    DownloadRequest,
    DownloadScheduler,
    Grant,
    PrincipalKind,
    Queued,
    RangeKind,
    Rejected,
)
from arkvory_sched.testing import FakeClock

MB = 1_000_000
MIB = 1024 * 1024
RANGE_BYTES = 8 * MIB
TICK_SECONDS = 0.5


RequestTimerLike = Callable[[anyio.Event, float], Awaitable[None]]


@dataclass(slots=True)
class ClientSpec:
    """Who downloads what, and when they start."""

    name: str
    principal: str
    kind: PrincipalKind
    size: int
    arrival: float
    requested_class: str | None = None


@dataclass(slots=True)
class ClientResult:
    spec: ClientSpec
    first_start: float | None = None
    finished: float | None = None
    estimate_at: float | None = None
    estimate: float | None = None
    estimate_earliest: float | None = None
    estimate_latest: float | None = None
    first_position: int | None = None
    polls: int = 0
    rejections: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def completion(self) -> float | None:
        if self.finished is None:
            return None
        return self.finished - self.spec.arrival

    @property
    def wait(self) -> float | None:
        if self.first_start is None:
            return None
        return self.first_start - self.spec.arrival


@dataclass(slots=True)
class _Client:
    spec: ClientSpec
    result: ClientResult
    download_id: str
    offset: int = 0
    ticket: str | None = None
    done: bool = False


@dataclass(slots=True)
class _Transfer:
    client: _Client
    grant: Grant
    byte_range: ByteRange
    finish_virtual: float
    reported_virtual: float


@dataclass(slots=True)
class SimulationRun:
    """What a run observed, for assertions and tables."""

    results: list[ClientResult]
    duration: float
    busy_while_waiting: float
    waiting_time: float
    max_active_sessions: int
    preemptions: int
    samples: list[tuple[float, int, dict[str, int]]]
    busy_while_class_waiting: dict[str, float] = field(default_factory=dict)
    class_waiting_time: dict[str, float] = field(default_factory=dict)

    @property
    def link_busy_share(self) -> float:
        return 1.0 if self.waiting_time <= 0 else self.busy_while_waiting / self.waiting_time

    def link_busy_share_of(self, group: str) -> float:
        """The share of the time clients of ``group`` (their requested class, or
        ``"default"``) had arrived and not finished in which the link carried data."""
        waiting = self.class_waiting_time.get(group, 0.0)
        return 1.0 if waiting <= 0 else self.busy_while_class_waiting.get(group, 0.0) / waiting


class LinkSimulation:
    """Run ``clients`` against ``scheduler`` until every client finished (or ``horizon``)."""

    def __init__(
        self,
        scheduler: DownloadScheduler | Callable[[RequestTimerLike], DownloadScheduler],
        clock: FakeClock,
        clients: list[ClientSpec],
        *,
        bandwidth: float,
        seed: int = 1,
        horizon: float = 24 * 3600.0,
        observe: Callable[[float], dict[str, int]] | None = None,
        estimate_after: float = 0.0,
    ) -> None:
        """``estimate_after``: a client's estimate is the first one with a position it
        is told at or after this time (a window's opening, say), not before."""
        self._scheduler = (
            scheduler if isinstance(scheduler, DownloadScheduler) else scheduler(self.virtual_wait)
        )
        self._clock = clock
        self._origin = clock.monotonic()
        self._bandwidth = bandwidth
        self._random = random.Random(seed)
        self._horizon = horizon
        self._observe = observe
        self._estimate_after = estimate_after
        self._arrived_by_group: dict[str, int] = {}
        self._busy_by_group: dict[str, float] = {}
        self._waiting_by_group: dict[str, float] = {}
        self._clients = [
            _Client(spec, ClientResult(spec), download_id=f"dl-{index:06d}")
            for index, spec in enumerate(clients)
        ]
        self._events: list[tuple[float, int, int, _Client | anyio.Event | None]] = []
        self._tasks: anyio.abc.TaskGroup | None = None
        self._counter = 0
        self._transfers: dict[int, _Transfer] = {}
        self._finishing: list[tuple[float, int]] = []
        self._virtual = 0.0
        self._now = 0.0
        self._busy_while_waiting = 0.0
        self._waiting_time = 0.0
        self._max_active = 0
        self._samples: list[tuple[float, int, dict[str, int]]] = []

    # ------------------------------------------------------------ event plumbing
    _REQUEST, _TICK, _TIMEOUT = 0, 1, 2

    def _schedule(self, at: float, kind: int, client: _Client | anyio.Event | None) -> None:
        self._counter += 1
        heapq.heappush(self._events, (at, self._counter, kind, client))

    def _next_completion_time(self) -> float:
        while self._finishing and self._finishing[0][1] not in self._transfers:
            heapq.heappop(self._finishing)
        if not self._finishing:
            return float("inf")
        finish_virtual = self._finishing[0][0]
        per_transfer = self._bandwidth / len(self._transfers)
        return self._now + max(0.0, finish_virtual - self._virtual) / per_transfer

    def _advance_to(self, when: float) -> None:
        elapsed = when - self._now
        if elapsed <= 0:
            return
        busy = bool(self._transfers)
        if self._anyone_waiting():
            self._waiting_time += elapsed
            if busy:
                self._busy_while_waiting += elapsed
        for group, arrived in self._arrived_by_group.items():
            if arrived:
                self._waiting_by_group[group] = self._waiting_by_group.get(group, 0.0) + elapsed
                if busy:
                    self._busy_by_group[group] = self._busy_by_group.get(group, 0.0) + elapsed
        if busy:
            self._virtual += elapsed * self._bandwidth / len(self._transfers)
        self._now = when
        self._clock.set_monotonic(self._origin + when)

    def _anyone_waiting(self) -> bool:
        return self._arrived_unfinished > 0

    async def virtual_wait(self, event: anyio.Event, timeout: float) -> None:
        """A per-request wait on simulated time: the timeout is an event of the run."""
        self._schedule(self._now + timeout, self._TIMEOUT, event)
        await event.wait()

    async def _settle(self) -> None:
        """Let every task woken by the last event run up to its next wait."""
        for _ in range(4):
            await anyio.lowlevel.checkpoint()

    def _spawn_request(self, client: _Client) -> None:
        assert self._tasks is not None
        self._tasks.start_soon(self._request, client)

    # ------------------------------------------------------------------ running
    async def run(self) -> SimulationRun:
        async with anyio.create_task_group() as tasks:
            self._tasks = tasks
            outcome = await self._run()
            tasks.cancel_scope.cancel()
        return outcome

    async def _run(self) -> SimulationRun:
        for client in self._clients:
            self._schedule(client.spec.arrival, self._REQUEST, client)
        self._schedule(0.0, self._TICK, None)
        self._arrived_unfinished = 0
        self._unfinished = len(self._clients)
        while self._unfinished and self._now < self._horizon:
            next_event = self._events[0][0] if self._events else float("inf")
            next_completion = self._next_completion_time()
            if next_completion <= next_event:
                self._advance_to(next_completion)
                await self._complete_transfer(heapq.heappop(self._finishing)[1])
                await self._settle()
                continue
            at, _, kind, subject = heapq.heappop(self._events)
            self._advance_to(at)
            if kind == self._TICK:
                await self._tick()
            elif kind == self._TIMEOUT:
                assert isinstance(subject, anyio.Event)
                subject.set()
            elif isinstance(subject, _Client):
                self._spawn_request(subject)
            await self._settle()
        stats = await self._scheduler.stats()
        return SimulationRun(
            results=[client.result for client in self._clients],
            duration=self._now,
            busy_while_waiting=self._busy_while_waiting,
            waiting_time=self._waiting_time,
            max_active_sessions=self._max_active,
            preemptions=stats.preemptions_total,
            samples=self._samples,
            busy_while_class_waiting=self._busy_by_group,
            class_waiting_time=self._waiting_by_group,
        )

    async def _tick(self) -> None:
        for token, transfer in self._transfers.items():
            progressed = int(self._virtual - transfer.reported_virtual)
            if progressed > 0:
                transfer.reported_virtual += progressed
                await self._scheduler.progress(transfer.grant, progressed)
            del token
        await self._scheduler.tick()
        stats = await self._scheduler.stats()
        self._max_active = max(self._max_active, stats.active)
        if self._observe is not None and int(self._now * 2) % 10 == 0:
            self._samples.append((self._now, stats.active, self._observe(self._now)))
        self._schedule(self._now + TICK_SECONDS, self._TICK, None)

    def _request_for(self, client: _Client) -> DownloadRequest:
        size = client.spec.size
        end = min(size, client.offset + RANGE_BYTES)
        kind = RangeKind.BOUNDED
        return DownloadRequest(
            principal=client.spec.principal,
            principal_kind=client.spec.kind,
            object_id=f"object-{client.spec.size}",
            object_size=size,
            byte_range=ByteRange(client.offset, end, kind),
            download_id=client.download_id,
            client_address=f"10.0.{hash(client.download_id) % 250}.1",
            requested_class=client.spec.requested_class,
            ticket=client.ticket,
        )

    async def _request(self, client: _Client) -> None:
        result = client.result
        if result.polls == 0:
            self._arrived_unfinished += 1
            group = _group(client.spec)
            self._arrived_by_group[group] = self._arrived_by_group.get(group, 0) + 1
        result.polls += 1
        decision = await self._scheduler.admit(self._request_for(client))
        if isinstance(decision, Admitted):
            if decision.ticket is not None:
                client.ticket = decision.ticket
            if result.first_start is None:
                result.first_start = self._now
            byte_range = decision.grant.byte_range
            assert byte_range is not None
            transfer = _Transfer(
                client,
                decision.grant,
                byte_range,
                self._virtual + byte_range.length,
                self._virtual,
            )
            token = decision.grant.token
            self._transfers[token] = transfer
            heapq.heappush(self._finishing, (transfer.finish_virtual, token))
            return
        jitter = self._random.uniform(0.0, 0.25)
        if isinstance(decision, Queued):
            if decision.ticket is not None:
                client.ticket = decision.ticket
            if (
                result.estimate is None
                and decision.position is not None
                and self._now >= self._estimate_after
            ):
                wall_now = self._clock.wall()
                result.estimate_at = self._now
                result.estimate = self._now + (decision.starts_at - wall_now)
                result.estimate_earliest = self._now + (decision.starts_earliest - wall_now)
                result.estimate_latest = self._now + (decision.starts_latest - wall_now)
                result.first_position = decision.position
            self._schedule(self._now + decision.retry_after + jitter, self._REQUEST, client)
            return
        assert isinstance(decision, Rejected)
        result.rejections += 1
        self._schedule(self._now + decision.retry_after + jitter, self._REQUEST, client)

    async def _complete_transfer(self, token: int) -> None:
        transfer = self._transfers.pop(token)
        client = transfer.client
        left = transfer.finish_virtual - transfer.reported_virtual
        if left > 0:
            await self._scheduler.progress(transfer.grant, int(left))
        await self._scheduler.report(transfer.grant, Delivered(transfer.byte_range))
        client.offset = transfer.byte_range.end
        if client.offset >= client.spec.size:
            client.done = True
            client.result.finished = self._now
            self._unfinished -= 1
            self._arrived_unfinished -= 1
            self._arrived_by_group[_group(client.spec)] -= 1
            return
        self._spawn_request(client)


def _group(spec: ClientSpec) -> str:
    return spec.requested_class or "default"


def oracle_completions(clients: list[ClientSpec], slots: int, bandwidth: float) -> list[float]:
    """The ideal: ``slots`` whole files at a time in arrival order, never an idle slot.

    Same processor-sharing link as the simulation, but a file starts the instant a slot
    frees. Returns completion times (finish − arrival) in client order.
    """
    order = sorted(range(len(clients)), key=lambda index: (clients[index].arrival, index))
    pending = list(order)
    completions = [0.0] * len(clients)
    running: dict[int, float] = {}  # client index -> virtual finish
    virtual = 0.0
    now = 0.0
    cursor = 0
    while cursor < len(pending) or running:
        while (
            cursor < len(pending)
            and len(running) < slots
            and (clients[pending[cursor]].arrival <= now)
        ):
            index = pending[cursor]
            running[index] = virtual + clients[index].size
            cursor += 1
        next_arrival = clients[pending[cursor]].arrival if cursor < len(pending) else float("inf")
        if not running:
            now = next_arrival
            continue
        index, finish_virtual = min(running.items(), key=lambda item: item[1])
        per = bandwidth / len(running)
        finish_time = now + (finish_virtual - virtual) / per
        if len(running) < slots and next_arrival < finish_time:
            virtual += (next_arrival - now) * per
            now = next_arrival
            continue
        virtual = finish_virtual
        now = finish_time
        del running[index]
        completions[index] = now - clients[index].arrival
    return completions
