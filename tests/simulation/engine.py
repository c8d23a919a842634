"""A deterministic discrete-event simulation of a mass update, driven through the port.

The simulated world:

* one link of ``bandwidth`` bytes/s shared by every response in flight (processor
  sharing; a slow client's response takes at most its cap, see :mod:`.link`);
* clients of the kinds people actually use (:class:`ClientKind`): protocol clients that
  read their object in 8 MiB ranges with an ``Arkvory-Download-Id``, come back when
  ``Retry-After`` says (plus a little jitter) and return the last ticket they got; and
  third-party tools without an id — a whole-file GET (curl, wget with ``--retry``), a
  resume from the middle (``curl -C -``), a ZIP reader's tail read before the body.
  Their requests go through what the middleware does with them: a queued one is held
  up to ``hold_seconds``, asking again whenever the scheduler signals a change (each
  tick, each report), before it is answered ``503`` with ``Retry-After``, which the tool
  honours; a protocol client's is held so too while it is at the door (R-HOLD-2);
* the scheduler under test, on a :class:`FakeClock` that jumps from event to event, with
  a tick every 500 ms and progress reports for in-flight responses on each tick.

Nothing here sleeps: a 20-minute mass update runs in seconds, and the same seed gives
the same run. A store that answers over the network (PostgreSQL) runs the same way:
simulated time moves only once every request in progress has its answer.
"""

from __future__ import annotations

import heapq
import random
from collections import deque
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
    Queued,
    RangeKind,
    Rejected,
)
from arkvory_sched.policy import NEWCOMER_CHECK_SECONDS
from arkvory_sched.testing import FakeClock

from .clients import TAIL_BYTES, ClientKind, ClientResult, ClientSpec
from .idle import IdleSlots
from .link import SharedLink
from .oracle import oracle_completions

__all__ = [
    "MB",
    "MIB",
    "ClientKind",
    "ClientResult",
    "ClientSpec",
    "LinkSimulation",
    "RequestTimerLike",
    "SimulationRun",
    "oracle_completions",
]

MB = 1_000_000
MIB = 1024 * 1024
RANGE_BYTES = 8 * MIB
TICK_SECONDS = 0.5


RequestTimerLike = Callable[[anyio.Event, float], Awaitable[None]]


@dataclass(slots=True)
class _Client:
    spec: ClientSpec
    result: ClientResult
    download_id: str
    address: str
    offset: int = 0
    ticket: str | None = None
    done: bool = False
    tail_read: bool = False  # a TAIL client's tail read was delivered
    held_until: float | None = None  # held by the middleware until then
    asking: bool = False  # a request of this client is being decided


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
    usable_slots: int = 0
    idle_slot_seconds: float = 0.0
    longest_idle_stretch: float = 0.0
    queued_time: float = 0.0
    """Seconds in which some client had arrived and not yet started."""
    carried_while_queued: float = 0.0
    """Bytes the link carried in those seconds."""
    bandwidth: float = 0.0

    @property
    def link_use_while_queued(self) -> float:
        """The share of the link's capacity used while someone waited to start
        (issue #30): what more slots could have filled."""
        capacity = self.bandwidth * self.queued_time
        return 1.0 if capacity <= 0 else self.carried_while_queued / capacity

    @property
    def link_busy_share(self) -> float:
        return 1.0 if self.waiting_time <= 0 else self.busy_while_waiting / self.waiting_time

    def link_busy_share_of(self, group: str) -> float:
        """The share of the time clients of ``group`` (their requested class, or
        ``"default"``) had arrived and not finished in which the link carried data."""
        waiting = self.class_waiting_time.get(group, 0.0)
        return 1.0 if waiting <= 0 else self.busy_while_class_waiting.get(group, 0.0) / waiting

    @property
    def idle_share(self) -> float:
        """Idle slot-seconds while anyone waited ÷ all slot-seconds of the run."""
        total = self.usable_slots * self.duration
        return 0.0 if total <= 0 else self.idle_slot_seconds / total


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
        slots: int = 0,
        hold_seconds: float = 0.0,
        hold_limit: int = 0,
        serial: bool = False,
    ) -> None:
        """``estimate_after``: a client's estimate is the first one with a position it
        is told at or after this time (a window's opening, say), not before.
        ``slots``: the usable slots, for the idle-slot measure (0: not measured).
        ``hold_seconds``/``hold_limit``: the middleware's hold of requests without an
        id (``SchedulerSettings.hold_seconds``, at most ``transfer_queue_limit`` held).
        ``serial``: decide requests one at a time, in the order they were sent. A store
        that answers over the network would otherwise decide simultaneous requests in
        the order its connections happen to answer, and no two runs would be alike.
        Meant for session admissions: a request the store itself holds (the per-request
        queue's wait) would hold every request behind it."""
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
        self._hold_seconds = hold_seconds
        self._hold_limit = hold_limit
        self._arrived_by_group: dict[str, int] = {}
        self._busy_by_group: dict[str, float] = {}
        self._waiting_by_group: dict[str, float] = {}
        self._clients = [
            _Client(
                spec,
                ClientResult(spec),
                download_id=f"dl-{index:06d}",
                address=f"10.{100 + index // 65536}.{index // 256 % 256}.{index % 256}",
            )
            for index, spec in enumerate(clients)
        ]
        self._events: list[tuple[float, int, int, _Client | anyio.Event | None]] = []
        self._tasks: anyio.abc.TaskGroup | None = None
        self._counter = 0
        self._link: SharedLink[_Client] = SharedLink(bandwidth)
        self._idle = IdleSlots(slots)
        self._held: dict[int, _Client] = {}  # id(client) -> client, in the order held
        self._asking = 0  # requests being decided and not parked on simulated time
        self._answered: anyio.Event | None = None
        self._serial = serial
        self._sent: deque[_Client] = deque()  # serial: requests not yet decided
        self._sent_event = anyio.Event()
        self._now = 0.0
        self._busy_while_waiting = 0.0
        self._waiting_time = 0.0
        self._max_active = 0
        self._queued_time = 0.0
        self._carried_while_queued = 0.0
        self._samples: list[tuple[float, int, dict[str, int]]] = []

    # ------------------------------------------------------------ event plumbing
    _REQUEST, _TICK, _TIMEOUT, _HOLD_END = 0, 1, 2, 3

    def _schedule(self, at: float, kind: int, client: _Client | anyio.Event | None) -> None:
        self._counter += 1
        heapq.heappush(self._events, (at, self._counter, kind, client))

    def _advance_to(self, when: float) -> None:
        elapsed = when - self._now
        if elapsed <= 0:
            return
        busy = self._link.busy
        if self._anyone_waiting():
            self._waiting_time += elapsed
            if busy:
                self._busy_while_waiting += elapsed
        for group, arrived in self._arrived_by_group.items():
            if arrived:
                self._waiting_by_group[group] = self._waiting_by_group.get(group, 0.0) + elapsed
                if busy:
                    self._busy_by_group[group] = self._busy_by_group.get(group, 0.0) + elapsed
        if self._idle.waiting:
            self._queued_time += elapsed
            self._carried_while_queued += self._link.carrying() * elapsed
        self._link.advance(elapsed)
        self._idle.advance(elapsed)
        self._now = when
        self._clock.set_monotonic(self._origin + when)

    def _anyone_waiting(self) -> bool:
        return self._arrived_unfinished > 0

    async def virtual_wait(self, event: anyio.Event, timeout: float) -> None:
        """A per-request wait on simulated time: the timeout is an event of the run."""
        self._schedule(self._now + timeout, self._TIMEOUT, event)
        self._done_asking()  # parked: simulated time may move on
        try:
            await event.wait()
        finally:
            self._asking += 1

    async def _settle(self) -> None:
        """Let every task woken by the last event run up to its next wait, and every
        request being decided get its answer (a store may answer over the network)."""
        for _ in range(4):
            await anyio.lowlevel.checkpoint()
        while self._asking:
            self._answered = anyio.Event()
            await self._answered.wait()

    def _done_asking(self) -> None:
        self._asking -= 1
        if not self._asking and self._answered is not None:
            self._answered.set()

    def _spawn_request(self, client: _Client) -> None:
        assert self._tasks is not None
        client.asking = True
        self._asking += 1
        if self._serial:
            self._sent.append(client)
            self._sent_event.set()
        else:
            self._tasks.start_soon(self._request, client)

    async def _decide_in_order(self) -> None:
        """Serial mode: one request at a time, in the order the clients sent them."""
        while True:
            while self._sent:
                await self._request(self._sent.popleft())
            self._sent_event = anyio.Event()
            await self._sent_event.wait()

    # ------------------------------------------------------------------ running
    async def run(self) -> SimulationRun:
        async with anyio.create_task_group() as tasks:
            self._tasks = tasks
            if self._serial:
                tasks.start_soon(self._decide_in_order)
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
            completion = self._link.next_completion(self._now)
            if completion is not None and completion[0] <= next_event:
                self._advance_to(completion[0])
                await self._complete_transfer(completion[1])
                await self._settle()
                continue
            at, _, kind, subject = heapq.heappop(self._events)
            self._advance_to(at)
            if kind == self._TICK:
                await self._tick()
            elif kind == self._TIMEOUT:
                assert isinstance(subject, anyio.Event)
                subject.set()
            elif kind == self._HOLD_END:
                assert isinstance(subject, _Client)
                if subject.held_until is not None and not subject.asking:
                    self._spawn_request(subject)
            elif isinstance(subject, _Client):
                self._spawn_request(subject)
            await self._settle()
        self._idle.close(self._now)
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
            usable_slots=self._idle.usable,
            idle_slot_seconds=self._idle.idle_slot_seconds,
            longest_idle_stretch=self._idle.longest_stretch,
            queued_time=self._queued_time,
            carried_while_queued=self._carried_while_queued,
            bandwidth=self._bandwidth,
        )

    async def _tick(self) -> None:
        link = self._link
        for transfer in list(link.transfers.values()):
            progressed = int(link.position(transfer) - transfer.reported_virtual)
            if progressed > 0:
                transfer.reported_virtual += progressed
                await self._scheduler.progress(transfer.grant, progressed)
        await self._scheduler.tick()
        self._wake_held()
        stats = await self._scheduler.stats()
        self._max_active = max(self._max_active, stats.active)
        if self._observe is not None and int(self._now * 2) % 10 == 0:
            self._samples.append((self._now, stats.active, self._observe(self._now)))
        self._schedule(self._now + TICK_SECONDS, self._TICK, None)

    def _wake_held(self) -> None:
        """The scheduler signalled a change: every held request asks again (R-HOLD-1)."""
        for client in list(self._held.values()):
            if not client.asking:
                self._spawn_request(client)

    def _request_for(self, client: _Client) -> DownloadRequest:
        spec = client.spec
        if spec.client is not ClientKind.SDK:
            return self._third_party_request(client)
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

    @staticmethod
    def _third_party_request(client: _Client) -> DownloadRequest:
        """What the middleware's ``read_request`` makes of a tool's GET: no id, no
        ticket, the range its ``Range`` header names (none: the whole object)."""
        spec = client.spec
        size = spec.size
        byte_range: ByteRange | None = None
        if spec.client is ClientKind.RESUME:
            byte_range = ByteRange(spec.resume_from, size, RangeKind.OPEN)
        elif spec.client is ClientKind.TAIL and not client.tail_read:
            byte_range = ByteRange(size - TAIL_BYTES, size, RangeKind.SUFFIX)
        return DownloadRequest(
            principal=spec.principal,
            principal_kind=spec.kind,
            object_id=f"object-{size}",
            object_size=size,
            byte_range=byte_range,
            client_address=client.address,
            requested_class=spec.requested_class,
        )

    async def _request(self, client: _Client) -> None:
        try:
            await self._ask(client)
        finally:
            client.asking = False
            self._done_asking()

    async def _ask(self, client: _Client) -> None:
        result = client.result
        if result.polls == 0:
            self._arrived_unfinished += 1
            group = _group(client.spec)
            self._arrived_by_group[group] = self._arrived_by_group.get(group, 0) + 1
            self._idle.arrived(self._now)
        result.polls += 1
        decision = await self._scheduler.admit(self._request_for(client))
        if isinstance(decision, Admitted):
            self._release_hold(client)
            if decision.ticket is not None:
                client.ticket = decision.ticket
            if result.first_start is None:
                result.first_start = self._now
                self._idle.started(self._now)
            byte_range = decision.grant.byte_range
            assert byte_range is not None
            token = decision.grant.token
            self._link.start(token, client, decision.grant, byte_range, client.spec.rate_cap)
            return
        if isinstance(decision, Queued):
            # The first estimate scored is the first poll's, as the scheduler scores it:
            # a newcomer's answer (before the client held any ticket) is not.
            polled = client.ticket is not None
            if decision.ticket is not None:
                client.ticket = decision.ticket
            # Its interval is judged on the first such answer, its point on the first
            # one told on a configured or measured rate (ADR 0042).
            if polled and decision.position is not None and self._now >= self._estimate_after:
                wall_now = self._clock.wall()
                if result.estimate_at is None:
                    result.estimate_at = self._now
                    result.estimate_earliest = self._now + (decision.starts_earliest - wall_now)
                    result.estimate_latest = self._now + (decision.starts_latest - wall_now)
                    result.first_position = decision.position
                    result.guessed = decision.guessed
                if result.estimate is None and not decision.guessed:
                    result.estimate = self._now + (decision.starts_at - wall_now)
            if self._held_on(client, decision, newcomer=not polled):
                return
        else:
            assert isinstance(decision, Rejected)
            self._release_hold(client)
            result.rejections += 1
        jitter = self._random.uniform(0.0, 0.25)
        self._schedule(self._now + decision.retry_after + jitter, self._REQUEST, client)

    def _held_on(self, client: _Client, decision: Queued, *, newcomer: bool) -> bool:
        """Whether the middleware keeps holding a queued request, rather than answering
        ``503`` now (its ``_hold``: up to ``hold_seconds``, at most ``hold_limit``
        requests at once): one without an id, or a protocol client's while it is at the
        door (R-HOLD-2), a ``newcomer``'s (no ticket yet) up to its first answer's 2 s."""
        if self._hold_seconds <= 0:
            return False
        if client.spec.client is ClientKind.SDK and not decision.at_the_door:
            self._release_hold(client)
            return False
        if client.held_until is None:
            if len(self._held) >= self._hold_limit:
                return False
            hold = self._hold_seconds
            if client.spec.client is ClientKind.SDK and newcomer:
                hold = min(hold, NEWCOMER_CHECK_SECONDS)  # a newcomer: its first answer is due
            client.held_until = self._now + hold
            self._held[id(client)] = client
            self._schedule(client.held_until, self._HOLD_END, client)
        if self._now < client.held_until:
            return True
        self._release_hold(client)
        return False

    def _release_hold(self, client: _Client) -> None:
        if client.held_until is not None:
            client.held_until = None
            del self._held[id(client)]

    async def _complete_transfer(self, token: int) -> None:
        transfer = self._link.finish(token)
        client = transfer.owner
        left = transfer.finish_virtual - transfer.reported_virtual
        if left > 0:
            await self._scheduler.progress(transfer.grant, int(left))
        await self._scheduler.report(transfer.grant, Delivered(transfer.byte_range))
        self._wake_held()
        client.offset = transfer.byte_range.end
        if client.spec.client is ClientKind.TAIL and not client.tail_read:
            client.tail_read = True  # the central directory read: now the body
        elif client.spec.client is not ClientKind.SDK or client.offset >= client.spec.size:
            self._finish(client)
            return
        self._spawn_request(client)

    def _finish(self, client: _Client) -> None:
        client.done = True
        client.result.finished = self._now
        self._unfinished -= 1
        self._arrived_unfinished -= 1
        self._arrived_by_group[_group(client.spec)] -= 1
        self._idle.finished(self._now)


def _group(spec: ClientSpec) -> str:
    return spec.requested_class or "default"
