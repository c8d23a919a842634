"""The parts of the core and HTTP benchmarks that decide what their figures mean.

A benchmark whose verdict or whose measured path is wrong reports a wrong figure without
failing, so these pin down the verdicts, the request the in-process part times and the
arithmetic of the instruction counts.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from benchmarks._http_apps import (
    bare_memory_app,
    benchmark_settings,
    expected_bytes,
    wrapped_memory_app,
)
from benchmarks._report import quantile, write_section
from benchmarks.core_bench import SizeResult, problems, scalings
from benchmarks.http_bench import WORKLOADS, scope_for
from benchmarks.http_instructions import REQUESTS, Count

from arkvory_sched import SchedulerSettings


def _size(size: int, tick_ms: float, poll_us: float = 40.0, refused: int = 0) -> SizeResult:
    result = SizeResult(size=size, target=size, memory=730.0)
    result.tick_ms = [tick_ms] * 20
    result.poll_us = [poll_us] * 200
    result.range_us = [7.0] * 200
    result.refused = refused
    return result


def test_the_tick_may_grow_a_tenth_of_the_queue_and_the_poll_as_a_logarithm() -> None:
    small, large = _size(4_096, 0.1), _size(1_048_576, 2.5)
    assert problems([small, large]) == []  # 25× for a queue 256× as long
    tick = scalings([small, large])[0]
    assert tick.limit == pytest.approx(25.6) and tick.ok
    found = problems([small, _size(1_048_576, 2.7, poll_us=90.0)])
    assert [text.split(" grew")[0] for text in found] == [
        "median tick",
        "waiting client's poll, median",
    ]


def test_over_a_short_span_the_tick_may_grow_as_a_logarithm() -> None:
    assert problems([_size(4_096, 0.1), _size(65_536, 0.19)]) == []
    assert problems([_size(4_096, 0.1), _size(65_536, 0.21)]) != []


def test_a_refused_download_fails_the_run_however_fast() -> None:
    found = problems([_size(4_096, 0.1), _size(65_536, 0.1, refused=1)])
    assert found == ["65,536: 1 refused, 0 rejoined (must be 0)"]


async def _call(app: Any, path: str, headers: tuple[tuple[str, str], ...]) -> list[Any]:
    sent: list[Any] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        sent.append(message)

    await app(scope_for(path, headers), receive, send)
    return sent


@pytest.mark.parametrize("workload", WORKLOADS, ids=lambda w: w.key)
def test_the_in_process_apps_answer_the_request_the_servers_are_timed_on(workload: Any) -> None:
    for app, wrapped in ((bare_memory_app(), False), (wrapped_memory_app(), True)):
        messages = asyncio.run(_call(app, workload.memory_path, workload.headers))
        start, *bodies = messages
        headers = {name.decode(): value.decode() for name, value in start["headers"]}
        assert start["status"] == workload.status
        assert ("arkvory-download-class" in headers) is wrapped
        body = b"".join(message.get("body", b"") for message in bodies)
        assert body == expected_bytes(0, workload.body_size)


def test_an_instruction_count_is_net_of_what_the_server_does_idle() -> None:
    workload = next(w for w in WORKLOADS if w.key == "small")
    count = Count("wrapped", workload, 3_000_000, 2.0, 400_000, 8.0)
    assert count.idle_rate == 50_000
    assert count.per_request == (3_000_000 - 100_000) / REQUESTS["small"]


def test_the_servers_settings_never_throttle_the_load() -> None:
    # wrk's range connections all fit in one session, its small ones in the places.
    settings: SchedulerSettings = benchmark_settings()
    by_key = {w.key: w.connections for w in WORKLOADS}
    assert settings.ranges_per_session >= by_key["session"]
    assert settings.max_downloads >= by_key["small"]


def test_quantiles_are_nearest_rank() -> None:
    values = [float(v) for v in range(1, 201)]
    assert quantile(values, 0.99) == 198.0
    assert quantile(values[:50], 0.99) == 50.0
    assert quantile(values, 0.5) == 100.0


def test_a_benchmark_rewrites_its_own_section_and_keeps_the_others(tmp_path: Path) -> None:
    path = tmp_path / "RESULTS.md"
    path.write_text("# Benchmark results\n", encoding="utf-8")
    write_section("## One\n\nfirst\n", path)
    write_section("## Two\n\nsecond\n", path)
    write_section("## One\n\nagain\n", path)
    assert path.read_text(encoding="utf-8") == (
        "# Benchmark results\n\n## One\n\nagain\n\n## Two\n\nsecond\n"
    )
