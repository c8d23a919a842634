"""What every benchmark's report shares: its section of RESULTS.md, the statistics and
the way a figure is printed.

Each benchmark owns one ``## ...`` section of the results file and rewrites only that,
so the benchmarks run at different times and their latest figures still sit side by side.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Final

__all__ = [
    "RESULTS_PATH",
    "format_ms",
    "format_ratio",
    "median",
    "package_version",
    "quantile",
    "ratio",
    "verdict",
    "write_section",
]

RESULTS_PATH: Final = Path(__file__).resolve().parent / "RESULTS.md"


def write_section(path: Path, heading: str, section: str) -> None:
    """Replace the section of ``path`` that starts with the line ``heading``, or append
    it; the file is read just now, so a section another benchmark wrote meanwhile stays."""
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmark results\n"
    before, found, rest = text.partition(heading + "\n")
    if not found:
        path.write_text(text.rstrip("\n") + "\n\n" + section, encoding="utf-8")
        return
    following = rest.find("\n## ")
    after = rest[following + 1 :] if following >= 0 else ""
    path.write_text(before + section + ("\n" + after if after else ""), encoding="utf-8")


def package_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else math.nan


def quantile(values: Sequence[float], q: float) -> float:
    """Nearest-rank quantile (the p99 of fewer than 100 values is the largest); NaN for
    no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered), max(1, math.ceil(q * len(ordered)))) - 1]


def ratio(numerator: float, denominator: float) -> float:
    """``numerator / denominator``; NaN when either was not measured or is zero."""
    if math.isnan(numerator) or math.isnan(denominator) or denominator <= 0:
        return math.nan
    return numerator / denominator


def verdict(ok: bool) -> str:
    return "**pass**" if ok else "**FAIL**"


def format_ms(value: float) -> str:
    """Milliseconds as the reports print them: µs below 0.1 ms, "–" when not measured."""
    if math.isnan(value):
        return "–"
    return f"{value * 1000:.1f} µs" if value < 0.1 else f"{value:.2f} ms"


def format_ratio(value: float) -> str:
    if math.isnan(value) or math.isinf(value):
        return "–"
    return f"{value:,.0f}×" if value >= 100 else f"{value:.2g}×" if value < 1 else f"{value:.1f}×"
