"""The three mass-update scenarios, their figures and their printed tables.

Scenario 1 — 500 clients × 40 MB on a 40 MB/s link, 16 slots, arrivals over 10 s:
``ordered`` against the ideal oracle and against ``shared``.
Scenario 2 — mixed classes: a bulk fleet of 300 under one principal, 40 release
clients, 8 people arriving mid-run: reserve, weights, share and preemption at work.
Scenario 3 — mixed sizes (1 MB … 2 GB): ``smallest-first`` against ``ordered``.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable
from dataclasses import dataclass

import anyio

from arkvory_sched import (
    DownloadClass,
    InMemoryDownloadScheduler,
    PrincipalKind,
    SchedulerSettings,
    Strategy,
    generate_key,
)
from arkvory_sched.testing import FakeClock

from .engine import (
    MB,
    ClientResult,
    ClientSpec,
    LinkSimulation,
    RequestTimerLike,
    SimulationRun,
    oracle_completions,
)

LINK = 40 * MB
SLOTS = 16


def run_simulation(
    clients: list[ClientSpec],
    settings: SchedulerSettings,
    *,
    bandwidth: float = LINK,
    seed: int = 1,
    observe: Callable[[InMemoryDownloadScheduler], Callable[[float], dict[str, int]]] | None = None,
    wall_origin: float | None = None,
    estimate_after: float = 0.0,
) -> SimulationRun:
    """``wall_origin``: the wall time at the run's time 0 (for class windows)."""
    clock = FakeClock() if wall_origin is None else FakeClock(wall=wall_origin)
    key = generate_key()
    built: list[InMemoryDownloadScheduler] = []

    def build(timer: RequestTimerLike) -> InMemoryDownloadScheduler:
        scheduler = InMemoryDownloadScheduler(
            settings, clock=clock, ticket_keys=[key], request_timer=timer
        )
        built.append(scheduler)
        return scheduler

    def probe(now: float) -> dict[str, int]:
        return sample(now) if sample is not None else {}

    sample: Callable[[float], dict[str, int]] | None = None
    simulation = LinkSimulation(
        build,
        clock,
        clients,
        bandwidth=bandwidth,
        seed=seed,
        observe=probe if observe is not None else None,
        estimate_after=estimate_after,
    )
    if observe is not None:
        sample = observe(built[0])
    return anyio.run(simulation.run)


def _settings(strategy: Strategy, **changes: object) -> SchedulerSettings:
    base = SchedulerSettings(
        strategy=strategy,
        sessions=SLOTS,
        max_downloads=SLOTS,
        queue_limit=65_536,
    )
    return base.with_changes(**changes) if changes else base


def _percentile(values: list[float], share: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, math.ceil(share * len(ordered)) - 1))
    return ordered[index]


def _mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else 0.0


# ====================================================================== scenario 1
@dataclass(frozen=True)
class Scenario1:
    clients: int
    ordered: SimulationRun
    shared: SimulationRun
    shared_default_mean: float
    shared_round_robin_mean: float
    oracle_mean: float
    ordered_mean: float
    shared_mean: float
    first_batch_finish: float
    first_batch_bound: float
    estimate_within_bound_p95: float
    estimate_error_p95: float
    interval_hit_share: float
    errors: int
    unfinished: int


def mass_update_clients(
    count: int = 500, size: int = 40 * MB, spread: float = 10.0
) -> list[ClientSpec]:
    rng = random.Random(500)
    arrivals = sorted(rng.uniform(0.0, spread) for _ in range(count))
    return [
        ClientSpec(
            name=f"agent-{index}",
            principal=f"agent-{index}",
            kind=PrincipalKind.SERVICE,
            size=size,
            arrival=arrival,
        )
        for index, arrival in enumerate(arrivals)
    ]


def estimate_quality(
    results: list[ClientResult], *, service_from: float | None = None
) -> tuple[float, float, float]:
    """(p95 of error / allowed bound, p95 error seconds, share of starts inside interval).

    The error is each client's first start told on a configured or measured rate; the
    interval is its first answer's, a guess's too (ADR 0042).

    The bound is max(10 % of the wait, 2 s), the wait counted from arrival — or from
    ``service_from`` when nobody could be served before it (a window's opening: the
    hours before it would make the bound meaningless).
    """
    ratios: list[float] = []
    errors: list[float] = []
    inside = 0
    counted = 0
    for result in results:
        if result.first_start is None:
            continue
        if result.estimate is not None:
            since = result.spec.arrival if service_from is None else service_from
            wait = result.first_start - since
            error = abs(result.first_start - result.estimate)
            allowed = max(0.10 * wait, 2.0)
            ratios.append(error / allowed)
            errors.append(error)
        if result.estimate_earliest is None:
            continue
        counted += 1
        inside += started_inside(result)
    share = inside / counted if counted else 1.0
    return _percentile(ratios, 0.95), _percentile(errors, 0.95), share


def started_inside(result: ClientResult) -> bool:
    """Whether the client started inside the interval of its first answer with a place."""
    low, high = result.estimate_earliest, result.estimate_latest
    start = result.first_start
    if low is None or high is None or start is None:
        return False
    return low - 1e-6 <= start <= high + 1e-6


def scenario_1(count: int = 500) -> Scenario1:
    clients = mass_update_clients(count)
    ordered = run_simulation(clients, _settings(Strategy.ORDERED, reserve=0))
    # ``shared`` as the design describes it: admission per request and an equal share of
    # the link — every client's range in flight at once, the link split among them.
    shared = run_simulation(
        clients,
        _settings(
            Strategy.SHARED,
            max_downloads=count,
            transfer_queue_limit=1024,
            transfer_queue_wait_seconds=3600.0,
        ),
    )
    # ``shared`` with 16 per-request places and a room for everyone: round-robin over
    # 8 MiB ranges (close to equal share only when a file is many ranges long).
    shared_round_robin = run_simulation(
        clients,
        _settings(Strategy.SHARED, transfer_queue_limit=1024, transfer_queue_wait_seconds=3600.0),
    )
    # ``shared`` with the default 64-request waiting room, for information.
    shared_default = run_simulation(clients, _settings(Strategy.SHARED))
    oracle = oracle_completions(clients, SLOTS, LINK)
    ordered_completions = [r.completion for r in ordered.results if r.completion is not None]
    shared_completions = [r.completion for r in shared.results if r.completion is not None]
    finishes = sorted(r.finished for r in ordered.results if r.finished is not None)
    ratio_p95, error_p95, inside = estimate_quality(ordered.results)
    errors = sum(len(r.errors) for r in ordered.results + shared.results)
    unfinished = sum(
        r.finished is None
        for run in (ordered, shared, shared_round_robin, shared_default)
        for r in run.results
    )
    return Scenario1(
        clients=count,
        ordered=ordered,
        shared=shared,
        shared_round_robin_mean=_mean(
            [r.completion for r in shared_round_robin.results if r.completion is not None]
        ),
        shared_default_mean=_mean(
            [r.completion for r in shared_default.results if r.completion is not None]
        ),
        oracle_mean=_mean(oracle),
        ordered_mean=_mean(ordered_completions),
        shared_mean=_mean(shared_completions),
        first_batch_finish=finishes[SLOTS - 1] if len(finishes) >= SLOTS else math.inf,
        first_batch_bound=1.1 * SLOTS * (40 * MB) / LINK,
        estimate_within_bound_p95=ratio_p95,
        estimate_error_p95=error_p95,
        interval_hit_share=inside,
        errors=errors,
        unfinished=unfinished,
    )


def scenario_1_table(s: Scenario1) -> str:
    rows = [
        ("clients × size, link, slots", f"{s.clients} × 40 MB, 40 MB/s, {SLOTS}", ""),
        ("unfinished / client errors", f"{s.unfinished} / {s.errors}", "0 / 0"),
        ("mean completion, ideal oracle", f"{s.oracle_mean:8.1f} s", ""),
        (
            "mean completion, ordered",
            f"{s.ordered_mean:8.1f} s = {s.ordered_mean / s.oracle_mean:.3f} × ideal",
            "≤ 1.05 × ideal",
        ),
        (
            "mean completion, shared (equal share)",
            f"{s.shared_mean:8.1f} s; ordered = {s.ordered_mean / s.shared_mean:.3f} × shared",
            "ordered ≤ 0.55 × shared",
        ),
        (
            "mean completion, shared, 16 places",
            f"{s.shared_round_robin_mean:8.1f} s",
            "(round-robin over 8 MiB ranges)",
        ),
        (
            "mean completion, shared, 16 places, room 64",
            f"{s.shared_default_mean:8.1f} s",
            "(first-come cohorts hold the room)",
        ),
        (
            "16th completion (ordered)",
            f"{s.first_batch_finish:8.1f} s",
            f"≤ {s.first_batch_bound:.1f} s",
        ),
        ("link busy while anyone waits", f"{100 * s.ordered.link_busy_share:8.2f} %", "≥ 99 %"),
        (
            "first estimate error, p95",
            f"{s.estimate_error_p95:8.1f} s; p95 of error/bound {s.estimate_within_bound_p95:.2f}",
            "≤ 1.00 (bound: max(10 % of wait, 2 s))",
        ),
        ("start inside announced interval", f"{100 * s.interval_hit_share:8.1f} %", "≥ 90 %"),
        ("max active sessions", f"{s.ordered.max_active_sessions}", f"≤ {SLOTS}"),
    ]
    return table("Scenario 1 — mass update, equal files", rows)


# ====================================================================== scenario 2
@dataclass(frozen=True)
class Scenario2:
    run: SimulationRun
    preemptions: int
    class_mean_wait: dict[str, float]
    class_mean_completion: dict[str, float]
    interactive_max_wait: float
    fleet_max_active_while_contended: int
    fleet_share: int
    release_share_of_grants_while_both_wait: float
    unfinished: int
    max_active: int


def mixed_class_clients() -> list[ClientSpec]:
    rng = random.Random(2)
    clients: list[ClientSpec] = [
        ClientSpec(
            name=f"fleet-{index}",
            principal="fleet",
            kind=PrincipalKind.SERVICE,
            size=200 * MB,
            arrival=rng.uniform(0.0, 10.0),
            requested_class="bulk",
        )
        for index in range(300)
    ]
    clients += [
        ClientSpec(
            name=f"ci-{index}",
            principal=f"ci-{index % 10}",
            kind=PrincipalKind.SERVICE,
            size=200 * MB,
            arrival=rng.uniform(30.0, 60.0),
        )
        for index in range(40)
    ]
    clients += [
        ClientSpec(
            name=f"person-{index}",
            principal=f"person-{index}",
            kind=PrincipalKind.PERSON,
            size=100 * MB,
            arrival=300.0 + 60.0 * index,
        )
        for index in range(8)
    ]
    return clients


def scenario_2() -> Scenario2:
    clients = mixed_class_clients()
    settings = _settings(Strategy.ORDERED)

    def observe(scheduler: InMemoryDownloadScheduler) -> Callable[[float], dict[str, int]]:
        core = scheduler.core

        def sample(_now: float) -> dict[str, int]:
            per_class = core.stats().per_class
            return {
                "fleet_active": core.principal_active("fleet"),
                "contenders": per_class[DownloadClass.RELEASE].waiting,
            }

        return sample

    run = run_simulation(clients, settings, observe=observe)
    by_class: dict[str, list[ClientResult]] = {"bulk": [], "release": [], "interactive": []}
    for result in run.results:
        if result.spec.kind is PrincipalKind.PERSON:
            by_class["interactive"].append(result)
        elif result.spec.requested_class == "bulk":
            by_class["bulk"].append(result)
        else:
            by_class["release"].append(result)
    mean_wait = {
        name: _mean([r.wait for r in results if r.wait is not None])
        for name, results in by_class.items()
    }
    mean_completion = {
        name: _mean([r.completion for r in results if r.completion is not None])
        for name, results in by_class.items()
    }
    interactive_waits = [r.wait for r in by_class["interactive"] if r.wait is not None]
    contended_times = [now for now, _, sample in run.samples if sample["contenders"] > 0]
    settle = (contended_times[0] + 90.0) if contended_times else 0.0
    contended = [
        sample["fleet_active"]
        for now, _, sample in run.samples
        if sample["contenders"] > 0 and now >= settle
    ]
    # Weights 4:2 between release and bulk: while both wait, release should get ~2/3 of starts.
    release_starts = [r.first_start for r in by_class["release"] if r.first_start is not None]
    window_end = max(release_starts) if release_starts else 0.0
    window_start = min(r.spec.arrival for r in by_class["release"])
    bulk_in_window = sum(
        1
        for r in by_class["bulk"]
        if r.first_start is not None and window_start <= r.first_start <= window_end
    )
    release_in_window = len(release_starts)
    share = release_in_window / max(1, release_in_window + bulk_in_window)
    return Scenario2(
        run=run,
        preemptions=run.preemptions,
        class_mean_wait=mean_wait,
        class_mean_completion=mean_completion,
        interactive_max_wait=max(interactive_waits) if interactive_waits else math.inf,
        fleet_max_active_while_contended=max(contended) if contended else 0,
        fleet_share=settings.per_principal,
        release_share_of_grants_while_both_wait=share,
        unfinished=sum(r.finished is None for r in run.results),
        max_active=run.max_active_sessions,
    )


def scenario_2_table(s: Scenario2) -> str:
    rows = [
        ("clients", "300 bulk (one principal) + 40 release + 8 people, 200/100 MB", ""),
        ("unfinished", f"{s.unfinished}", "0"),
        ("max active sessions", f"{s.max_active}", f"≤ {SLOTS}"),
        (
            "mean wait: interactive / release / bulk",
            " / ".join(f"{s.class_mean_wait[c]:.1f} s" for c in ("interactive", "release", "bulk")),
            "interactive ≪ release < bulk",
        ),
        (
            "mean completion: interactive / release / bulk",
            " / ".join(
                f"{s.class_mean_completion[c]:.1f} s" for c in ("interactive", "release", "bulk")
            ),
            "",
        ),
        ("longest wait of a person (reserve)", f"{s.interactive_max_wait:.1f} s", "≤ 10 s"),
        (
            "release share of starts while both wait",
            f"{100 * s.release_share_of_grants_while_both_wait:.0f} %",
            "≥ 60 % (weights 4:2)",
        ),
        (
            "fleet active while release waits (after 90 s)",
            f"max {s.fleet_max_active_while_contended} (share {s.fleet_share})",
            "≤ share",
        ),
        ("preemptions", f"{s.preemptions}", "> 0"),
    ]
    return table("Scenario 2 — mixed classes", rows)


# ====================================================================== scenario 3
@dataclass(frozen=True)
class Scenario3:
    clients: int
    ordered_mean: float
    smallest_mean: float
    ordered_small_mean: float
    smallest_small_mean: float
    ordered_large_mean: float
    smallest_large_mean: float
    largest_wait_smallest_first: float
    unfinished: int


def mixed_size_clients(count: int = 160) -> list[ClientSpec]:
    rng = random.Random(3)
    clients = []
    for index in range(count):
        size = int(math.exp(rng.uniform(math.log(1 * MB), math.log(2000 * MB))))
        clients.append(
            ClientSpec(
                name=f"mixed-{index}",
                principal=f"mixed-{index}",
                kind=PrincipalKind.SERVICE,
                size=size,
                arrival=rng.uniform(0.0, 10.0),
            )
        )
    return clients


def scenario_3(count: int = 160) -> Scenario3:
    clients = mixed_size_clients(count)
    ordered = run_simulation(clients, _settings(Strategy.ORDERED))
    smallest = run_simulation(clients, _settings(Strategy.SMALLEST_FIRST))
    median_size = statistics.median(c.size for c in clients)

    def mean_of(run: SimulationRun, small: bool | None) -> float:
        return _mean(
            [
                r.completion
                for r in run.results
                if r.completion is not None
                and (small is None or (r.spec.size <= median_size) == small)
            ]
        )

    largest = max(smallest.results, key=lambda r: r.spec.size)
    return Scenario3(
        clients=count,
        ordered_mean=mean_of(ordered, None),
        smallest_mean=mean_of(smallest, None),
        ordered_small_mean=mean_of(ordered, True),
        smallest_small_mean=mean_of(smallest, True),
        ordered_large_mean=mean_of(ordered, False),
        smallest_large_mean=mean_of(smallest, False),
        largest_wait_smallest_first=largest.wait or math.inf,
        unfinished=sum(r.finished is None for r in ordered.results + smallest.results),
    )


def scenario_3_table(s: Scenario3) -> str:
    rows = [
        ("clients", f"{s.clients}, sizes 1 MB … 2 GB (log-uniform)", ""),
        ("unfinished", f"{s.unfinished}", "0"),
        (
            "mean completion: ordered / smallest-first",
            f"{s.ordered_mean:.1f} s / {s.smallest_mean:.1f} s "
            f"({s.smallest_mean / s.ordered_mean:.2f} ×)",
            "smallest-first lower",
        ),
        (
            "smaller half: ordered / smallest-first",
            f"{s.ordered_small_mean:.1f} s / {s.smallest_small_mean:.1f} s",
            "",
        ),
        (
            "larger half: ordered / smallest-first",
            f"{s.ordered_large_mean:.1f} s / {s.smallest_large_mean:.1f} s",
            "",
        ),
        ("wait of the largest object, smallest-first", f"{s.largest_wait_smallest_first:.1f} s",
         "finite (aging)"),
    ]  # fmt: skip
    return table("Scenario 3 — mixed sizes", rows)


def table(title: str, rows: list[tuple[str, str, str]]) -> str:
    width = [max(len(row[i]) for row in rows) for i in range(3)]
    header = ("figure", "measured", "target")
    width = [max(w, len(h)) for w, h in zip(width, header, strict=True)]
    lines = [title, ""]
    lines.append(" | ".join(h.ljust(w) for h, w in zip(header, width, strict=True)))
    lines.append("-+-".join("-" * w for w in width))
    for row in rows:
        lines.append(" | ".join(c.ljust(w) for c, w in zip(row, width, strict=True)))
    return "\n".join(lines)
