"""``benchmarks.pg_scale`` end to end at a tiny size, so that the harness cannot rot.

The million-waiting figure takes minutes and is run by hand; a harness that stopped
running would only be found then. This runs the whole of it, both stores, the ``COPY``
fill and its consistency check, the fold and the ticks, in a few seconds.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import asyncpg
from benchmarks.pg_scale import heading, main

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


def test_the_scale_benchmark_runs_at_a_tiny_size_and_writes_its_section(tmp_path: Path) -> None:
    url = require_database()
    before = asyncio.run(_leftover_schemas(url))
    output = tmp_path / "RESULTS.md"
    output.write_text("# Benchmark results\n\n## Another benchmark\n\nkept\n", encoding="utf-8")
    previous = signal.getsignal(signal.SIGTERM)
    try:
        status = main(["--dsn", url, "--sizes", "512", "--quick", "--output", str(output)])
    finally:
        signal.signal(signal.SIGTERM, previous)
    # 0: every answer of the expected kind, every measured tick led, freed slots were
    # claimed, and the positions the stores must know exactly are right.
    assert status == 0
    text = output.read_text(encoding="utf-8")
    assert "## Another benchmark\n\nkept" in text
    section = text[text.index(heading([512])) :]
    assert "| 512 | PostgreSQL ÷ in memory |" in section
    assert "leader's tick after a slot frees" in section
    assert asyncio.run(_leftover_schemas(url)) == before  # its schema is dropped
