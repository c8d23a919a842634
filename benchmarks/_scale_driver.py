"""What the queue's clients do in ``pg_scale``, the same against either store.

A :class:`Driver` holds one store's clients: the slot holders (downloads that hold the
16 slots and fetch a range per step), the waiters it polls, the newcomers it sends. It
runs the measurements in one order — polls at three positions, newcomers, range
admissions, then the steady churn — and only the pacing differs between the stores
(:class:`Pacer`): in memory a ``FakeClock`` steps and the driver times each ``tick()``;
on PostgreSQL the steps are real half seconds and the ticks are the leader process's.

The churn, each step of 0.5 s: every holder fetches its next 1 MiB range and the
longest-held release holder finishes its download (a slot frees; the leader's tick marks
the head of the queue for it); the first ``2 × sessions`` waiters in service order poll
every second (a marked one claims the slot and becomes a holder); one waiter far back
polls; one newcomer arrives at the end of the queue, and three newcomers in four come
back for their first poll 2 s later while the fourth never does (a no-show 32 s later).
On PostgreSQL a step's calls start spread over its first half, as requests arrive, and
run concurrently; in memory they run one after another, then the tick.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Final, Protocol

from arkvory_sched import (
    Admitted,
    ByteRange,
    Decision,
    Delivered,
    DownloadRequest,
    DownloadScheduler,
    Queued,
)
from benchmarks._scale_figures import ClientFigures, PollFigures, TickSample
from benchmarks._scale_workload import RANGE_BYTES, SESSIONS, ScaleWorkload, holder_request

__all__ = ["STEP_SECONDS", "Driver", "MemoryPacer", "Pacer", "Plan", "RealPacer"]

STEP_SECONDS: Final = 0.5  # the tick interval; one step of every client
HEAD_WINDOW: Final = 2 * SESSIONS  # waiters near the head that poll every second
HEAD_POLL_STEPS: Final = 2
NO_SHOW_EVERY: Final = 4  # one churn newcomer in four never comes back
POLL_WARMUP: Final = 3  # polls per position before the measured ones
NEWCOMER_WARMUP: Final = 5
SPREAD_SHARE: Final = 0.5  # a step's client calls start spread over its first half


@dataclass(frozen=True, slots=True)
class Plan:
    """Which downloads the clients use; made by the parent from the service order, so
    no process needs the whole order. ``positions`` are (label, download, position)."""

    waiting: int
    positions: tuple[tuple[str, int, int], ...]
    poll_samples: int
    newcomers: int
    range_samples: int
    heads: tuple[int, ...]  # the first waiters in service order (then the newcomers)
    far: tuple[int, ...]  # waiters far back, at random positions
    churn_warmup_steps: int
    churn_steps: int
    settle_seconds: float

    @property
    def churn_first(self) -> int:
        """The first download index of the churn's newcomers."""
        return self.waiting + NEWCOMER_WARMUP + self.newcomers


class Pacer(Protocol):
    """How a store's time passes between the driver's steps."""

    async def step(self, measuring: bool) -> None: ...

    async def after(self, moment: float, job: Awaitable[None]) -> None: ...

    async def settle(self, driver: Driver) -> None: ...

    def quiet(self, driver: Driver) -> contextlib.AbstractAsyncContextManager[None]: ...


@dataclass(slots=True)
class _Holder:
    request: DownloadRequest  # any range of the download; the driver sets the range
    offset: int
    finishes: bool  # release holders finish in turn; the interactive one never does

    def next_range(self, length: int) -> DownloadRequest:
        size = self.request.object_size
        end = size if length <= 0 else min(size, self.offset + length)
        return replace(self.request, byte_range=ByteRange(self.offset, end), ticket=None)


class Driver:
    """The clients of one store (their statements per call are a test's business:
    ``tests/postgres/test_one_round_trip.py``)."""

    def __init__(self, scheduler: DownloadScheduler, workload: ScaleWorkload, pacer: Pacer) -> None:
        self.scheduler = scheduler
        self.workload = workload
        self.pacer = pacer
        self._holders: list[_Holder] = []
        # The last ticket each polling client was given: it sends it back, as the SDK
        # does (R-TICKET-1). Only the few clients that poll have one.
        self._tickets: dict[int, str] = {}

    def _waiter(self, index: int) -> DownloadRequest:
        """Waiting download ``index``'s request, with its last ticket if it has one."""
        request = self.workload.request(index)
        ticket = self._tickets.get(index)
        return request if ticket is None else replace(request, ticket=ticket)

    def _keep_ticket(self, index: int, decision: Decision) -> None:
        if isinstance(decision, Queued) and decision.ticket is not None:
            self._tickets[index] = decision.ticket

    # ------------------------------------------------------------------ calls
    async def _timed(self, request: DownloadRequest) -> tuple[Decision, float]:
        started = time.perf_counter()
        decision = await self.scheduler.admit(request)
        return decision, time.perf_counter() - started

    async def start_holders(self) -> None:
        """On the empty queue, the downloads that hold every slot: 15 of class release,
        then one interactive for the reserved slot (interactive takes it last)."""
        for number in [*range(1, SESSIONS), 0]:
            request = holder_request(number)
            decision = await self.scheduler.admit(request)
            if not isinstance(decision, Admitted):
                raise RuntimeError(f"slot holder {number} was answered {decision!r}")
            await self._delivered(decision, request)
            self._holders.append(_Holder(request, RANGE_BYTES, finishes=number != 0))

    async def _delivered(self, decision: Admitted, request: DownloadRequest) -> None:
        assert request.byte_range is not None
        await self.scheduler.report(decision.grant, Delivered(request.byte_range))

    async def _fetch(self, holder: _Holder, whole: bool, figures: ClientFigures | None) -> None:
        """The holder's next range (the rest of its object when ``whole``), reported."""
        request = holder.next_range(0 if whole else RANGE_BYTES)
        decision, _ = await self._timed(request)
        if isinstance(decision, Admitted):
            await self._delivered(decision, request)
            assert request.byte_range is not None
            holder.offset = request.byte_range.end
            if holder.offset >= request.object_size and holder in self._holders:
                self._holders.remove(holder)
                if figures is not None:
                    figures.churn.completions += 1
            return
        if isinstance(decision, Queued):  # asked to yield its slot (R-PREEMPT): it waits
            if holder in self._holders:
                self._holders.remove(holder)
            if figures is not None:
                figures.churn.yielded += 1
        elif figures is not None:
            figures.churn.unexpected += 1

    async def keep_alive(self) -> None:
        """Every holder fetches its next range (an idle slot would be released)."""
        await asyncio.gather(*(self._fetch(h, False, None) for h in list(self._holders)))

    # ------------------------------------------------------------------ measurements
    async def measure(self, plan: Plan) -> ClientFigures:
        figures = ClientFigures()
        async with self.pacer.quiet(self):
            await self.pacer.settle(self)
            await self._polls(plan, figures)
            await self._newcomers(plan, figures)
        await self._ranges(plan, figures)
        await self._churn(plan, figures)
        return figures

    async def _polls(self, plan: Plan, figures: ClientFigures) -> None:
        """The same waiter at each position polls again and again, the positions in
        turn (so a slow spell of the machine falls on all three)."""
        for label, _, position in plan.positions:
            figures.polls[label] = PollFigures(label, position)
        for sample in range(POLL_WARMUP + plan.poll_samples):
            measured = sample >= POLL_WARMUP
            for label, index, _ in plan.positions:
                polls = figures.polls[label]
                decision, seconds = await self._timed(self._waiter(index))
                self._keep_ticket(index, decision)
                if not measured:
                    continue
                polls.seconds.append(seconds)
                if isinstance(decision, Queued):
                    polls.positions.append(decision.position)
                else:
                    polls.unexpected += 1

    async def _newcomers(self, plan: Plan, figures: ClientFigures) -> None:
        """Newcomers of the CI principals, each joining at the end of the queue."""
        for number in range(NEWCOMER_WARMUP + plan.newcomers):
            request = self.workload.request(plan.waiting + number)
            decision, seconds = await self._timed(request)
            if number < NEWCOMER_WARMUP:
                continue
            figures.newcomer_seconds.append(seconds)
            if not isinstance(decision, Queued) or decision.position is not None:
                figures.newcomer_unexpected += 1

    async def _ranges(self, plan: Plan, figures: ClientFigures) -> None:
        """The next range of an active download, the holders in turn; each reported."""
        holders = itertools.cycle(list(self._holders))
        for _ in range(plan.range_samples):
            holder = next(holders)
            request = holder.next_range(RANGE_BYTES)
            decision, seconds = await self._timed(request)
            figures.range_seconds.append(seconds)
            if not isinstance(decision, Admitted):
                figures.range_unexpected += 1
                continue
            await self._delivered(decision, request)
            assert request.byte_range is not None
            holder.offset = request.byte_range.end

    # ------------------------------------------------------------------ churn
    async def _churn(self, plan: Plan, figures: ClientFigures) -> None:
        churn = figures.churn
        heads = deque(plan.heads)
        far = itertools.cycle(plan.far) if plan.far else None
        returning: dict[int, list[int]] = {}
        newcomer = plan.churn_first
        claimed: set[int] = set()
        start = math.nan
        for step in range(plan.churn_warmup_steps + plan.churn_steps):
            measuring = step >= plan.churn_warmup_steps
            if step == plan.churn_warmup_steps:
                start = time.monotonic()
            counted = figures if measuring else None
            finishing = next((h for h in self._holders if h.finishes), None)
            work: list[Awaitable[None]] = [
                self._fetch(h, h is finishing, counted) for h in list(self._holders)
            ]
            window = list(itertools.islice(heads, HEAD_WINDOW))
            for index in window:
                if (step + index) % HEAD_POLL_STEPS == 0:
                    work.append(self._churn_poll("head", index, claimed, counted))
            if far is not None:
                work.append(self._churn_poll("far back", next(far), claimed, counted))
            for index in returning.pop(step, []):
                work.append(self._churn_poll("newcomer's first poll", index, claimed, counted))
            work.append(self._churn_newcomer(newcomer, step, returning, counted))
            newcomer += 1
            began = time.monotonic()
            gap = SPREAD_SHARE * STEP_SECONDS / len(work)
            await asyncio.gather(
                *(self.pacer.after(began + number * gap, job) for number, job in enumerate(work))
            )
            if measuring and time.monotonic() - began > STEP_SECONDS:
                churn.late_steps += 1
            if claimed:
                heads = deque(index for index in heads if index not in claimed)
                claimed.clear()
            churn.steps += measuring
            await self.pacer.step(measuring)
        churn.window = (start, time.monotonic())

    async def _churn_poll(
        self, kind: str, index: int, claimed: set[int], figures: ClientFigures | None
    ) -> None:
        request = self._waiter(index)
        decision, seconds = await self._timed(request)
        self._keep_ticket(index, decision)
        if isinstance(decision, Admitted):
            claimed.add(index)
            await self._delivered(decision, request)
            assert request.byte_range is not None
            self._holders.append(_Holder(request, request.byte_range.end, finishes=True))
        if figures is None:
            return
        figures.churn.polls.setdefault(kind, []).append(seconds)
        if isinstance(decision, Admitted):
            figures.churn.claims += 1
        elif not isinstance(decision, Queued):
            figures.churn.unexpected += 1

    async def _churn_newcomer(
        self,
        index: int,
        step: int,
        returning: dict[int, list[int]],
        figures: ClientFigures | None,
    ) -> None:
        decision, seconds = await self._timed(self.workload.request(index))
        self._keep_ticket(index, decision)
        if figures is not None:
            figures.churn.newcomers += 1
            figures.churn.polls.setdefault("newcomer", []).append(seconds)
        if not isinstance(decision, Queued):
            if figures is not None:
                figures.churn.unexpected += 1
            return
        if index % NO_SHOW_EVERY != NO_SHOW_EVERY - 1:
            back = step + max(1, math.ceil(decision.retry_after / STEP_SECONDS))
            returning.setdefault(back, []).append(index)


class MemoryPacer:
    """In memory: a step advances the ``FakeClock`` and runs one timed ``tick()``."""

    def __init__(self, advance: Callable[[float], None], scheduler: DownloadScheduler) -> None:
        self._advance = advance
        self._scheduler = scheduler
        self.ticks: list[TickSample] = []  # of the measured steps

    async def step(self, measuring: bool) -> None:
        self._advance(STEP_SECONDS)
        began, started = time.monotonic(), time.perf_counter()
        await self._scheduler.tick()
        elapsed = time.perf_counter() - started
        if measuring:
            self.ticks.append(TickSample(began, elapsed, True))

    async def after(self, moment: float, job: Awaitable[None]) -> None:
        await job  # no time passes within a step: the calls run one after another

    async def settle(self, driver: Driver) -> None:
        """Four ticks on the filled queue, the holders fetching meanwhile."""
        for _ in range(4):
            await driver.keep_alive()
            await self.step(False)

    @contextlib.asynccontextmanager
    async def quiet(self, driver: Driver) -> AsyncIterator[None]:
        yield  # no time passes between the quiet measurements: nobody goes idle


class RealPacer:
    """On PostgreSQL: steps of real time; the ticks are the leader process's own. While
    the quiet measurements run, the holders keep fetching in the background, every
    step, so that no slot is released as idle meanwhile."""

    def __init__(self, settle_seconds: float) -> None:
        self._settle_seconds = settle_seconds
        self._next = math.nan

    async def step(self, measuring: bool) -> None:
        now = time.monotonic()
        if math.isnan(self._next) or self._next < now - STEP_SECONDS:
            self._next = now  # the first step, or far behind: start counting again
        self._next += STEP_SECONDS
        await asyncio.sleep(max(0.0, self._next - time.monotonic()))

    async def after(self, moment: float, job: Awaitable[None]) -> None:
        """``job`` from ``moment`` (monotonic) on: a step's requests arrive spread out,
        not in one burst."""
        await asyncio.sleep(max(0.0, moment - time.monotonic()))
        await job

    async def settle(self, driver: Driver) -> None:
        await asyncio.sleep(self._settle_seconds)

    @contextlib.asynccontextmanager
    async def quiet(self, driver: Driver) -> AsyncIterator[None]:
        stop = asyncio.Event()

        async def traffic() -> None:
            while not stop.is_set():
                await driver.keep_alive()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), STEP_SECONDS)

        task = asyncio.create_task(traffic())
        try:
            yield
        finally:
            stop.set()
            await task
