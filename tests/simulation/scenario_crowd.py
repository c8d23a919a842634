"""Scenario 5 — the real crowd through one link, on both stores (issue #28).

16 slots on a 40 MB/s link. Objects of 20–60 MB fetched by the tools people use: the
SDK in ranges with a download id, and without an id whole-file GETs (curl, wget),
resumes from the middle (``curl -C -``) and ZIP readers that read the tail before the
body; a tenth of the clients, of every kind, can take only a tenth of their fair share
of the link. The first 20 arrive at once on a cold server — nothing measured yet — and
the rest over the following minute. Each crowd runs twice: with the link rate
configured (``SchedulerSettings(bandwidth=...)``) and without.

The figures, split by kind of client (protocol clients send a download id, third-party
tools do not): the p95 of |estimate error| ÷ max(10 % of the wait, 2 s) and the share of
starts inside the announced interval, judged on each client's first answer with a
position (a tool's first ``Queued`` answer, as the scheduler scores it, even when the
middleware's hold then admitted it), the error on its first start told on a configured or
measured rate (an answer on a guessed rate says so, and only its interval is judged: ADR
0042); the idle slot-seconds while anyone waits as a
share of all slot-seconds of the run, and the longest idle stretch; whether the first
answer with a position on the cold server had the real start inside its interval; the
mean completion.

PostgreSQL answers over the network, so its crowd is smaller (70 clients, the same
arrival rate) to keep a run under a minute.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

import anyio

from arkvory_sched import (
    DownloadScheduler,
    InMemoryDownloadScheduler,
    PrincipalKind,
    SchedulerSettings,
    generate_key,
)
from arkvory_sched.testing import FakeClock

from .engine import (
    MB,
    ClientKind,
    ClientResult,
    ClientSpec,
    LinkSimulation,
    RequestTimerLike,
    SimulationRun,
)
from .scenarios import estimate_quality, started_inside
from .stores import on_postgres

__all__ = [
    "CROWD_SIZE",
    "GROUPS",
    "CrowdRun",
    "Store",
    "crowd_clients",
    "crowd_settings",
    "crowd_table",
    "scenario_crowd",
]

LINK = 40 * MB
SLOTS = 16
CROWD_SIZE = {"memory": 200, "postgres": 70}
ARRIVALS_PER_SECOND = 200 / 60.0  # after the cold burst
COLD_BURST = 20  # clients arriving at t = 0 on a fresh scheduler
SLOW_CAP = 0.1 * LINK / SLOTS  # a tenth of a client's fair share of the link
# Tools of the crowd, in shares of the clients: at least 30 % whole-file GETs.
TOOL_SHARES = (
    (ClientKind.GET, 0.35),
    (ClientKind.RESUME, 0.125),
    (ClientKind.TAIL, 0.125),
)
SLOW_SHARE = 0.10

# The groups figures are given for: the two the targets name, then each tool.
GROUPS = ("protocol", "third-party", "get", "resume", "tail", "slow")


class Store(StrEnum):
    MEMORY = "memory"
    POSTGRES = "postgres"


@dataclass(frozen=True)
class GroupFigures:
    clients: int
    estimates: int
    ratio_p95: float  # p95 of |error| ÷ max(10 % of the wait, 2 s)
    error_p95: float
    inside_share: float
    mean_wait: float
    mean_completion: float


@dataclass(frozen=True)
class ColdAnswer:
    """The first answer with a position on the cold server, and the start it announced."""

    at: float
    earliest: float
    latest: float
    start: float | None

    @property
    def inside(self) -> bool:
        return self.start is not None and self.earliest - 1e-6 <= self.start <= self.latest + 1e-6


@dataclass(frozen=True)
class CrowdRun:
    store: Store
    configured: bool
    run: SimulationRun
    groups: dict[str, GroupFigures]
    cold: ColdAnswer | None
    mean_completion: float
    unfinished: int
    real_seconds: float

    @property
    def label(self) -> str:
        return f"{self.store}, {'rate set' if self.configured else 'no rate'}"


def crowd_clients(count: int, seed: int = 28) -> list[ClientSpec]:
    rng = random.Random(seed)
    tools: list[ClientKind] = []
    for tool, share in TOOL_SHARES:
        tools += [tool] * math.ceil(share * count)
    tools += [ClientKind.SDK] * (count - len(tools))
    rng.shuffle(tools)
    slow = set(rng.sample(range(count), round(SLOW_SHARE * count)))
    later = count - COLD_BURST
    arrivals = [0.0] * COLD_BURST + sorted(
        rng.uniform(0.0, later / ARRIVALS_PER_SECOND) for _ in range(later)
    )
    clients = []
    for index, (tool, arrival) in enumerate(zip(tools, arrivals, strict=True)):
        size = int(rng.uniform(20.0, 60.0) * MB)
        clients.append(
            ClientSpec(
                name=f"{tool}-{index}",
                principal=f"crowd-{index}",
                kind=PrincipalKind.SERVICE,
                size=size,
                arrival=arrival,
                client=tool,
                rate_cap=SLOW_CAP if index in slow else None,
                resume_from=int(size * rng.uniform(0.4, 0.6)),
            )
        )
    return clients


def crowd_settings(*, configured: bool) -> SchedulerSettings:
    """Every slot usable by the crowd (no reserve for people, who are not in it)."""
    return SchedulerSettings(
        sessions=SLOTS,
        reserve=0,
        max_downloads=SLOTS,
        queue_limit=65_536,
        bandwidth=LINK if configured else None,
    )


def scenario_crowd(store: Store, *, configured: bool, database_url: str = "") -> CrowdRun:
    """One run of the crowd; ``database_url`` is needed for PostgreSQL."""
    clients = crowd_clients(CROWD_SIZE[store])
    settings = crowd_settings(configured=configured)
    started = time.perf_counter()
    if store is Store.MEMORY:
        run = anyio.run(_on_memory, clients, settings)
    else:
        run = anyio.run(_on_postgres, clients, settings, database_url)
    return _figures(store, configured, run, time.perf_counter() - started)


def _simulation(
    build: Callable[[RequestTimerLike], DownloadScheduler],
    clock: FakeClock,
    clients: list[ClientSpec],
    settings: SchedulerSettings,
    *,
    serial: bool = False,
) -> LinkSimulation:
    return LinkSimulation(
        build,
        clock,
        clients,
        bandwidth=LINK,
        slots=settings.sessions - settings.reserve,
        hold_seconds=settings.hold_seconds,
        hold_limit=settings.transfer_queue_limit,
        serial=serial,
    )


async def _on_memory(clients: list[ClientSpec], settings: SchedulerSettings) -> SimulationRun:
    clock = FakeClock()
    key = generate_key()

    def build(timer: RequestTimerLike) -> DownloadScheduler:
        return InMemoryDownloadScheduler(
            settings, clock=clock, ticket_keys=[key], request_timer=timer
        )

    return await _simulation(build, clock, clients, settings).run()


async def _on_postgres(
    clients: list[ClientSpec], settings: SchedulerSettings, url: str
) -> SimulationRun:
    """The crowd on a throwaway schema, queue time on the run's :class:`FakeClock`."""

    def simulation(
        build: Callable[[RequestTimerLike], DownloadScheduler], clock: FakeClock
    ) -> LinkSimulation:
        return _simulation(build, clock, clients, settings, serial=True)

    return await on_postgres(url, settings, simulation)


def _group_members(group: str, result: ClientResult) -> bool:
    spec = result.spec
    if group == "protocol":
        return spec.client.protocol
    if group == "third-party":
        return not spec.client.protocol
    if group == "slow":
        return spec.rate_cap is not None
    return spec.client.value == group


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _figures(store: Store, configured: bool, run: SimulationRun, real: float) -> CrowdRun:
    groups = {}
    for group in GROUPS:
        members = [r for r in run.results if _group_members(group, r)]
        ratio_p95, error_p95, inside = estimate_quality(members)
        groups[group] = GroupFigures(
            clients=len(members),
            estimates=sum(r.estimate is not None and r.first_start is not None for r in members),
            ratio_p95=ratio_p95,
            error_p95=error_p95,
            inside_share=inside,
            mean_wait=_mean([r.wait for r in members if r.wait is not None]),
            mean_completion=_mean([r.completion for r in members if r.completion is not None]),
        )
    answered = [r for r in run.results if r.estimate_at is not None]
    cold = None
    if answered:
        first = min(answered, key=lambda r: r.estimate_at or 0.0)
        cold = ColdAnswer(
            at=first.estimate_at or 0.0,
            earliest=first.estimate_earliest or 0.0,
            latest=first.estimate_latest or 0.0,
            start=first.first_start,
        )
    return CrowdRun(
        store=store,
        configured=configured,
        run=run,
        groups=groups,
        cold=cold,
        mean_completion=_mean([r.completion for r in run.results if r.completion is not None]),
        unfinished=sum(r.finished is None for r in run.results),
        real_seconds=real,
    )


def crowd_table(runs: list[CrowdRun]) -> str:
    """One column per run, with the issue's target beside each figure."""
    rows: list[tuple[str, list[str], str]] = [
        ("clients: sdk/get/resume/tail (slow)", [_mix(r) for r in runs], ""),
        ("unfinished", [f"{r.unfinished}" for r in runs], "0"),
        ("mean completion", [f"{r.mean_completion:.1f} s" for r in runs], ""),
    ]
    for group in GROUPS:
        target = group in ("protocol", "third-party")
        rows.append(
            (
                f"{group}: p95 error/bound (estimates)",
                [_ratio(r.groups[group]) for r in runs],
                "≤ 1.00" if target else "",
            )
        )
        rows.append(
            (
                f"{group}: starts inside interval",
                [f"{100 * r.groups[group].inside_share:.1f} %" for r in runs],
                "≥ 90 %" if target else "",
            )
        )
        rows.append(
            (
                f"{group}: mean wait / completion",
                [
                    f"{r.groups[group].mean_wait:.1f} / {r.groups[group].mean_completion:.1f} s"
                    for r in runs
                ],
                "",
            )
        )
    rows += [
        ("idle slot-seconds while anyone waits", [_idle(r) for r in runs], "≤ 1 % of all"),
        (
            "longest idle stretch, waiters present",
            [f"{r.run.longest_idle_stretch:.1f} s" for r in runs],
            "≤ 3 s",
        ),
        ("cold first answer: start in interval", [_cold(r.cold) for r in runs], "inside"),
        ("first answers on a guessed rate", [_guessed(r) for r in runs], ""),
        ("real time of the run", [f"{r.real_seconds:.1f} s" for r in runs], ""),
    ]
    header = ["figure", *[r.label for r in runs], "target"]
    lines = [[name, *values, target] for name, values, target in rows]
    width = [max(len(line[i]) for line in [header, *lines]) for i in range(len(header))]
    text = ["Scenario 5 — the real crowd (issue #28)", ""]
    text.append(" | ".join(h.ljust(w) for h, w in zip(header, width, strict=True)))
    text.append("-+-".join("-" * w for w in width))
    for line in lines:
        text.append(" | ".join(c.ljust(w) for c, w in zip(line, width, strict=True)))
    return "\n".join(text)


def _mix(run: CrowdRun) -> str:
    counts = [sum(r.spec.client is tool for r in run.run.results) for tool in ClientKind]
    return "/".join(map(str, counts)) + f" ({run.groups['slow'].clients})"


def _ratio(figures: GroupFigures) -> str:
    return f"{figures.ratio_p95:.2f} ({figures.estimates})"


def _idle(run: CrowdRun) -> str:
    return f"{run.run.idle_slot_seconds:.0f} s = {100 * run.run.idle_share:.2f} %"


def _guessed(run: CrowdRun) -> str:
    """How many clients' first answer was a guess (ADR 0042), how many of those had the
    start inside its interval, and how many were told a start on a rate later."""
    guessed = [r for r in run.run.results if r.guessed and r.first_start is not None]
    inside = sum(started_inside(r) for r in guessed)
    scored = sum(r.estimate is not None for r in guessed)
    return f"{len(guessed)}: {inside} inside, {scored} told again on a rate"


def _cold(cold: ColdAnswer | None) -> str:
    if cold is None:
        return "no answer with a position"
    start = "never" if cold.start is None else f"{cold.start:.1f}"
    verdict = "inside" if cold.inside else "OUTSIDE"
    return f"{verdict}: {start} in [{cold.earliest:.1f}, {cold.latest:.1f}] at {cold.at:.1f}"
