"""``benchmarks.pg_scale`` end to end at a tiny size, so that the harness cannot rot.

The million-waiting figure takes ten minutes and is run by hand; a harness that stopped
running would only be found then. This runs the whole of it, both stores, the ``COPY``
fill and its consistency check, two server processes and the churn, in a few seconds.
"""

from __future__ import annotations

import signal
from pathlib import Path

from benchmarks._scale_report import heading
from benchmarks.pg_scale import main

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
    assert "| 512 | PostgreSQL ÷ in memory |" in section
    assert "leader's tick in steady churn" in section
