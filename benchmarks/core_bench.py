"""Steady-state benchmark of the in-memory scheduler core (``SchedulerCore``).

Run with ``python -m benchmarks.core_bench`` (``make bench``) or ``--quick``;
``benchmarks/README.md`` explains the workload.

For each queue size the benchmark fills a fresh core under ``tracemalloc`` (the memory
per waiting session), then builds a second core in a steady state: the downloads arrive
over one check period (300 s of simulated time, a tick every 0.5 s), every client comes
back when its answer told it to, active clients fetch ranges at link rate, a few never
come back and a few stop half-way; then it times ``tick()``, polls and range admissions
over a measured window.

The figures are judged as growth from the smallest size to the largest of the run: both
ends run in one process minutes apart, so the shared machine's load falls on both, and
a scheduler whose cost grows with the queue cannot hide behind a fast machine. The exit
status is 1 when a figure grew beyond its limit.

Nothing here reads the core's private state: the driver only calls ``admit``, ``report``
and ``tick`` and looks at the public counters, like a server would.
"""

from __future__ import annotations

import argparse
import datetime
import math
import platform
import shlex
import sys
import time
from collections.abc import Sequence
from typing import Final, NamedTuple

from benchmarks._core_run import MAX_QUEUE, SESSIONS, STEP, SizeResult, SteadyRun, measure_memory
from benchmarks._machine import cpu_count, cpu_model, load_average
from benchmarks._report import (
    RESULTS_PATH,
    median,
    package_version,
    quantile,
    verdict,
    write_section,
)

__all__ = ["main", "problems", "scalings"]

DEFAULT_SIZES: Final = (4_096, 65_536, 1_048_576)
QUICK_SIZES: Final = (4_096, 65_536)
TICKS: Final = 60
QUICK_TICKS: Final = 20
SECTION_HEADING: Final = "## Scheduler core"

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


def _ms(value: float) -> str:
    return "–" if math.isnan(value) else f"{value:.3f} ms"


def _us(value: float) -> str:
    return "–" if math.isnan(value) else f"{value:.1f} µs"


def _bytes(value: float) -> str:
    return f"{value:,.0f} B"


class Scaling(NamedTuple):
    """One figure at the smallest and the largest size, and how much it may grow: both
    ends run in one process minutes apart, so the shared machine's load falls on both,
    and a cost that grows with the queue cannot hide behind a fast machine."""

    name: str
    smallest: float
    largest: float
    limit: float
    target: float  # the absolute target at the largest size
    shown: str  # "ms", "µs" or "B"

    @property
    def growth(self) -> float:
        return self.largest / self.smallest

    @property
    def ok(self) -> bool:
        return self.growth <= self.limit

    def row(self) -> str:
        show = {"ms": _ms, "µs": _us, "B": _bytes}[self.shown]
        met = "met" if self.largest <= self.target else "**not met**"
        return (
            f"| {self.name} | {show(self.smallest)} | {show(self.largest)} "
            f"| {self.growth:.2f}× (≤ {self.limit:.2f}×) | {verdict(self.ok)} "
            f"| ≤ {show(self.target)}: {met} |"
        )


def scalings(results: Sequence[SizeResult]) -> list[Scaling]:
    """The four figures, from the smallest size of the run to its largest."""
    small, large = results[0], results[-1]
    tick_limit = max(LOG_GROWTH, GROWTH_SHARE * large.target / small.target)
    tick_target = TICK_TARGETS_MS.get(large.size, max(TICK_TARGETS_MS.values()))
    found = [
        Scaling(
            "median tick",
            median(small.tick_ms),
            median(large.tick_ms),
            tick_limit,
            tick_target,
            "ms",
        ),
        Scaling(
            "waiting client's poll, median",
            median(small.poll_us),
            median(large.poll_us),
            LOG_GROWTH,
            POLL_TARGET_US,
            "µs",
        ),
        Scaling(
            "range admission of an active session, median",
            median(small.range_us),
            median(large.range_us),
            LOG_GROWTH,
            RANGE_TARGET_US,
            "µs",
        ),
    ]
    if small.memory is not None and large.memory is not None:
        found.append(
            Scaling(
                "memory per waiting session",
                small.memory,
                large.memory,
                FLAT_GROWTH,
                MEMORY_TARGET_BYTES,
                "B",
            )
        )
    return found


def problems(results: Sequence[SizeResult]) -> list[str]:
    """Why the run fails: a figure grew too much, or the driver lost track of a download."""
    found = [
        f"{s.name} grew {s.growth:.2f}× (≤ {s.limit:.2f}×)" for s in scalings(results) if not s.ok
    ]
    for r in results:
        if r.refused or r.rejoined:
            found.append(f"{r.size:,}: {r.refused} refused, {r.rejoined} rejoined (must be 0)")
    return found


def render(
    results: Sequence[SizeResult], argv: Sequence[str], ticks: int, wall: float, loads: str
) -> str:
    now = datetime.datetime.now(datetime.UTC)
    command = shlex.join(["python", "-m", "benchmarks.core_bench", *argv])
    small, large = results[0], results[-1]
    lines = [
        SECTION_HEADING,
        "",
        f"- Command: `{command}`; whole run {wall:.0f} s",
        f"- Machine: {cpu_count()} CPUs, {cpu_model()}, {platform.system()} "
        f"{platform.release()}; CPython {platform.python_version()}, sortedcontainers "
        f"{package_version('sortedcontainers')}",
        f"- Date: {now:%Y-%m-%d %H:%M} UTC; load average before / after: {loads}",
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
            f"| {'–' if r.memory is None else _bytes(r.memory)} "
            f"| {r.refused} / {r.rejoined} |"
        )
    return "\n".join([*lines, ""])


def parse_sizes(text: str) -> tuple[int, ...]:
    sizes = tuple(sorted({int(part.replace("_", "")) for part in text.split(",") if part}))
    if len(sizes) < 2 or any(size < 64 or size > MAX_QUEUE for size in sizes):
        raise argparse.ArgumentTypeError(f"two or more sizes between 64 and {MAX_QUEUE:,}")
    return sizes


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.core_bench",
        description="Steady-state benchmark of the in-memory scheduler core.",
    )
    parser.add_argument(
        "--sizes",
        type=parse_sizes,
        help="waiting-queue sizes, comma-separated (default "
        "4096,65536,1048576; with --quick 4096,65536)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"{QUICK_TICKS} measured ticks, small sizes, print only",
    )
    args_list = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(args_list)
    sizes: tuple[int, ...] = args.sizes or (QUICK_SIZES if args.quick else DEFAULT_SIZES)
    ticks = QUICK_TICKS if args.quick else TICKS
    load_before = load_average()
    started = time.perf_counter()
    results: list[SizeResult] = []
    for size in sizes:
        memory = measure_memory(size)
        run = SteadyRun(size, ticks)
        result = run.run()
        run.close()
        result.memory = memory
        print(
            f"[{size:,}] median tick {_ms(median(result.tick_ms))}, poll "
            f"{_us(median(result.poll_us))}, range admission {_us(median(result.range_us))}, "
            f"{_bytes(memory)} per session",
            file=sys.stderr,
            flush=True,
        )
        results.append(result)
    wall = time.perf_counter() - started
    section = render(results, args_list, ticks, wall, f"{load_before}; {load_average()}")
    print(section)
    if not args.quick:
        write_section(RESULTS_PATH, SECTION_HEADING, section)
        print(f"written to {RESULTS_PATH}", file=sys.stderr)
    found = problems(results)
    for problem in found:
        print(f"problem: {problem}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
