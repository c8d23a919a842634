"""``benchmarks.pg_scale`` end to end at a tiny size, so that the harness cannot rot.

The million-waiting figure takes minutes and is run by hand; a harness that stopped
running would only be found then. This runs the whole of it, both stores, the ``COPY``
fill and its consistency check, the fold and the ticks, in a few seconds.
"""

from __future__ import annotations

import asyncio
import signal

import asyncpg
import pytest
from benchmarks.pg_scale import DSN_VARIABLE, heading, main

from tests.pg import require_database


async def _leftover_schemas(url: str) -> list[str]:
    connection = await asyncpg.connect(url)
    try:
        rows = await connection.fetch(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'arkvory_bench_scale_%'"
        )
    finally:
        await connection.close()
    return [row[0] for row in rows]


def test_the_scale_benchmark_runs_at_a_tiny_size_and_prints_its_section(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = require_database()
    monkeypatch.setenv(DSN_VARIABLE, url)
    before = asyncio.run(_leftover_schemas(url))
    previous = signal.getsignal(signal.SIGTERM)
    try:
        status = main(["--sizes", "512", "--quick"])
    finally:
        signal.signal(signal.SIGTERM, previous)
    # 0: every answer of the expected kind, every measured tick led, freed slots were
    # claimed, and the positions the stores must know exactly are right.
    assert status == 0
    text = capsys.readouterr().out
    section = text[text.index(heading([512])) :]
    assert "| 512 | PostgreSQL ÷ in memory |" in section
    assert "leader's tick after a slot frees" in section
    assert asyncio.run(_leftover_schemas(url)) == before  # its schema is dropped
