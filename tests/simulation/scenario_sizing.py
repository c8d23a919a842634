"""Scenario 6 — slots that size themselves (issue #30, ADR 0038).

One 40 MB/s link, 40 MB objects fetched by the SDK, arrivals over two minutes: more
work than the link carries in that time, so a queue builds. Three crowds:

* **half slow:** every other client can take a twentieth of the link (2 MB/s: a site
  behind a thin line). Sixteen fixed slots fill with slow clients, which hold them
  twenty times as long, and the link runs part empty while dozens wait;
* **fast:** every client takes any share; the fewer slots, the sooner each finishes;
* **turning:** fast for the first minute, then a minute of slow clients (the site's
  line degrades), then two minutes of fast ones again: the count must follow within
  30 s and fall back once the slow ones are done.

Each runs with ``min_sessions`` (automatic, 2 to 64 slots) beside fixed counts, with
the link's rate configured and without. The figures: the link's use while someone
waits to start, the mean completion against the oracle that knows each client's speed
(:func:`~tests.simulation.oracle.oracle_with_speeds`), the count's course (its most,
its changes of direction), and for the fast crowd the best fixed count's mean.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio

from arkvory_sched import (
    DownloadScheduler,
    InMemoryDownloadScheduler,
    PrincipalKind,
    SchedulerSettings,
    generate_key,
)
from arkvory_sched.testing import FakeClock

from .engine import MB, ClientSpec, LinkSimulation, RequestTimerLike, SimulationRun
from .oracle import oracle_with_speeds
from .stores import Build, on_postgres

__all__ = [
    "AUTO",
    "LINK",
    "SizingRun",
    "fast_clients",
    "half_slow_clients",
    "run_sizing",
    "turning_clients",
]

LINK = 40 * MB
SIZE = 40 * MB
SLOW = LINK / 20
AUTO = (2, 64)  # the automatic count's bounds
ARRIVALS = 120.0


def _clients(caps: list[float | None], seed: int, span: float = ARRIVALS) -> list[ClientSpec]:
    rng = random.Random(seed)
    arrivals = sorted(rng.uniform(0.0, span) for _ in caps)
    return [
        ClientSpec(
            f"c{index:04d}",
            f"svc-{index:04d}",
            PrincipalKind.SERVICE,
            SIZE,
            arrival,
            rate_cap=cap,
        )
        for index, (arrival, cap) in enumerate(zip(arrivals, caps, strict=True))
    ]


def half_slow_clients(count: int = 160, seed: int = 30) -> list[ClientSpec]:
    """Every other client at a twentieth of the link, in random order."""
    caps: list[float | None] = [SLOW if index % 2 else None for index in range(count)]
    random.Random(seed).shuffle(caps)
    return _clients(caps, seed)


def fast_clients(count: int = 160, seed: int = 31) -> list[ClientSpec]:
    return _clients([None] * count, seed)


def turning_clients(count: int = 240, seed: int = 32) -> list[ClientSpec]:
    """A minute of fast arrivals, a minute of slow ones (the site's line degrades), then
    two minutes of fast ones again: long enough to see the count fall back."""
    quarter = count // 4
    fast = _clients([None] * quarter, seed, 60.0)
    slow = _clients([SLOW] * quarter, seed + 1, 60.0)
    again = _clients([None] * (count - 2 * quarter), seed + 2, 120.0)
    for offset, group in ((60.0, slow), (120.0, again)):
        for spec in group:
            spec.arrival += offset
    every = fast + slow + again
    for index, spec in enumerate(every):
        spec.name, spec.principal = f"c{index:04d}", f"svc-{index:04d}"
    return every


@dataclass
class SizingRun:
    """One crowd on one configuration."""

    label: str
    run: SimulationRun
    counts: list[tuple[float, int]] = field(default_factory=list)
    """The count in force after each tick."""
    ideal: float = 0.0

    @property
    def mean_completion(self) -> float:
        done = [r.completion for r in self.run.results if r.completion is not None]
        return sum(done) / len(done) if done else float("inf")

    @property
    def most(self) -> int:
        return max((count for _, count in self.counts), default=0)

    def turns(self) -> list[float]:
        """When the count changed direction."""
        turns: list[float] = []
        direction = 0
        for (_, before), (at, after) in itertools.pairwise(self.counts):
            if after == before:
                continue
            step = 1 if after > before else -1
            if direction and step != direction:
                turns.append(at)
            direction = step
        return turns

    def first_at_least(self, count: int, after: float = 0.0) -> float | None:
        """When the count first reached ``count`` at or after ``after``."""
        return next((at for at, n in self.counts if at >= after and n >= count), None)


def sizing_settings(sessions: int | tuple[int, int], *, configured: bool) -> SchedulerSettings:
    """Fixed ``sessions``, or automatic between the two bounds; no reserve."""
    low, high = (sessions, sessions) if isinstance(sessions, int) else sessions
    return SchedulerSettings(
        sessions=high,
        min_sessions=low if low < high else None,
        reserve=0,
        max_downloads=high,
        queue_limit=65_536,
        bandwidth=LINK if configured else None,
    )


def run_sizing(
    label: str,
    clients: list[ClientSpec],
    settings: SchedulerSettings,
    *,
    database_url: str = "",
) -> SizingRun:
    """One run on memory, or on PostgreSQL when ``database_url`` is given."""
    counts: list[tuple[float, int]] = []
    if database_url:
        run = anyio.run(_on_postgres, clients, settings, database_url, counts)
    else:
        run = anyio.run(_on_memory, clients, settings, counts)
    ideal = oracle_with_speeds(clients, LINK)
    return SizingRun(label, run, counts, sum(ideal) / len(ideal))


def _counting(
    scheduler: DownloadScheduler, clock: FakeClock, counts: list[tuple[float, int]]
) -> DownloadScheduler:
    """``scheduler`` with its count in force recorded after each tick."""
    origin = clock.monotonic()
    tick = scheduler.tick

    async def counted() -> object:
        report = await tick()
        stats = await scheduler.stats()
        counts.append((clock.monotonic() - origin, stats.sessions_limit))
        return report

    scheduler.tick = counted  # type: ignore[method-assign,assignment]
    return scheduler


def _simulation(
    build: Callable[[RequestTimerLike], DownloadScheduler],
    clock: FakeClock,
    clients: list[ClientSpec],
    settings: SchedulerSettings,
    *,
    serial: bool = False,
) -> LinkSimulation:
    """The crowd through the middleware's hold, as a server holds it: a waiter at the
    door takes a slot the moment it frees or opens."""
    return LinkSimulation(
        build,
        clock,
        clients,
        bandwidth=LINK,
        serial=serial,
        hold_seconds=settings.hold_seconds,
        hold_limit=settings.transfer_queue_limit,
    )


async def _on_memory(
    clients: list[ClientSpec], settings: SchedulerSettings, counts: list[tuple[float, int]]
) -> SimulationRun:
    clock = FakeClock()
    key = generate_key()

    def build(timer: RequestTimerLike) -> DownloadScheduler:
        scheduler = InMemoryDownloadScheduler(
            settings, clock=clock, ticket_keys=[key], request_timer=timer
        )
        return _counting(scheduler, clock, counts)

    return await _simulation(build, clock, clients, settings).run()


async def _on_postgres(
    clients: list[ClientSpec],
    settings: SchedulerSettings,
    url: str,
    counts: list[tuple[float, int]],
) -> SimulationRun:
    def simulation(build: Build, clock: FakeClock) -> LinkSimulation:
        return _simulation(build, clock, clients, settings, serial=True)

    def wrap(scheduler: DownloadScheduler, clock: FakeClock) -> DownloadScheduler:
        return _counting(scheduler, clock, counts)

    return await on_postgres(url, settings, simulation, prefix="sizing", wrap=wrap)


@dataclass
class Scenario6:
    """Every crowd's runs, and the PostgreSQL runs when the database answered."""

    half: list[SizingRun]
    fast: list[SizingRun]
    turning: list[SizingRun]
    postgres: list[SizingRun] = field(default_factory=list)


FAST_FIXED = (2, 3, 4, 6, 16)  # the fixed counts the fast crowd's best is taken from


def scenario_6(database_url: str = "") -> Scenario6:
    """The three crowds on memory (``min_sessions`` told and untold against fixed
    counts); with ``database_url`` the half-slow crowd on PostgreSQL too."""

    def auto(told: bool) -> SchedulerSettings:
        return sizing_settings(AUTO, configured=told)

    def runs(clients: list[ClientSpec], fixed: tuple[int, ...]) -> list[SizingRun]:
        out = [
            run_sizing(f"auto, rate {told}", clients, auto(told == "told"))
            for told in ("told", "not told")
        ]
        for count in fixed:
            out.append(
                run_sizing(f"fixed {count}", clients, sizing_settings(count, configured=True))
            )
        return out

    scenario = Scenario6(
        half=runs(half_slow_clients(), (16,)),
        fast=runs(fast_clients(), FAST_FIXED),
        turning=runs(turning_clients(), (16,)),
    )
    if database_url:
        clients = half_slow_clients(POSTGRES_CROWD)
        for label, settings in (
            ("PostgreSQL, auto, rate told", auto(True)),
            ("PostgreSQL, auto, rate not told", auto(False)),
            ("PostgreSQL, fixed 16", sizing_settings(16, configured=True)),
        ):
            scenario.postgres.append(
                run_sizing(label, clients, settings, database_url=database_url)
            )
    return scenario


POSTGRES_CROWD = 120  # the half-slow crowd, smaller: PostgreSQL answers over the network


def follow(run: SizingRun, since: float = 60.0) -> tuple[float | None, float | None, int]:
    """For the turning crowd: seconds from the slow clients' first arrival (``since``)
    to the count's first rise, to its reaching 90 % of its most, and the count when the
    last client finished."""
    before = next((n for at, n in run.counts if at >= since), 0)
    rise = next((at - since for at, n in run.counts if at >= since and n > before), None)
    peak = max((n for at, n in run.counts if at >= since), default=0)
    near = run.first_at_least(math.ceil(0.9 * peak), since)
    return rise, None if near is None else near - since, run.counts[-1][1] if run.counts else 0


def scenario_6_table(s: Scenario6) -> str:
    lines = [
        "Scenario 6 — slots that size themselves (issue #30)",
        "",
        f"{'crowd':10} | {'configuration':31} | {'link use while queued':>21} | "
        f"{'mean ÷ oracle':>13} | {'most slots':>10} | {'turns':>5}",
        "-" * 106,
    ]
    crowds = (("half slow", s.half), ("fast", s.fast), ("turning", s.turning))
    for name, runs in (*crowds, ("half slow", s.postgres)):
        for r in runs:
            lines.append(
                f"{name:10} | {r.label:31} | {100 * r.run.link_use_while_queued:20.1f}% | "
                f"{r.mean_completion / r.ideal:13.2f} | {r.most:10d} | {len(r.turns()):5d}"
            )
    best = min((r for r in s.fast if r.label.startswith("fixed")), key=lambda r: r.mean_completion)
    for r in s.fast[:2]:
        lines.append(
            f"fast crowd, {r.label}: mean {r.mean_completion:.1f} s, "
            f"{100 * (r.mean_completion / best.mean_completion - 1):+.1f} % against the best "
            f"fixed count ({best.label}, {best.mean_completion:.1f} s); at most {r.most} slots"
        )
    for r in s.turning[:2]:
        rise, near, last = follow(r)
        lines.append(
            f"turning crowd, {r.label}: first rise {rise} s and 90 % of its most "
            f"{near} s after the slow clients began; {last} slots at the end"
        )
    return "\n".join(lines)
