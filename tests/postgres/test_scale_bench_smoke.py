"""``benchmarks.pg_scale`` end to end at a tiny size, so that the harness cannot rot.

Its figures are issue #17's before and after: a harness that stopped running would
leave the next measurement without a comparison. This runs the whole of it — both
stores, the empty queue and 512 waiting, the ``COPY`` fill and its consistency check,
two server processes, every figure — in a few seconds.
"""

from __future__ import annotations

import signal
from pathlib import Path

from benchmarks._scale_report import heading
from benchmarks.pg_scale import QUICK, main

from tests.pg import require_database


def test_the_scale_benchmark_runs_at_a_tiny_size_and_writes_its_section(tmp_path: Path) -> None:
    url = require_database()
    output = tmp_path / "RESULTS.md"
    output.write_text("# Benchmark results\n\n## Another benchmark\n\nkept\n", encoding="utf-8")
    previous = signal.getsignal(signal.SIGTERM)
    try:
        status = main(["--dsn", url, "--sizes", "512", "--quick", "--output", str(output)])
    finally:
        signal.signal(signal.SIGTERM, previous)
    # 0: every answer of the expected kind, the first waiter at position 1 on both stores,
    # and the in-memory store's positions those of the fill's service order.
    assert status == 0
    text = output.read_text(encoding="utf-8")
    assert "## Another benchmark\n\nkept" in text
    section = text[text.index(heading([512])) :]
    for part in ("### Goals", "### 4. The leader's tick in steady churn", "### 6."):
        assert part in section
    assert "| 512 | first (1) |" in section
    assert "| 512 | last ÷ first (p50) |" in section
    # Range admission of an active session never asks the database (the lease cache).
    assert f"| 0 of {QUICK.range_samples} calls |" in section
