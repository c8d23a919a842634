"""Writing one benchmark's section of RESULTS.md, shared by every benchmark.

Each benchmark owns one ``## ...`` section of the results file and rewrites only that,
so the benchmarks can run at different times and their results still sit side by side.
"""

from __future__ import annotations

import math
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

__all__ = [
    "format_ms",
    "format_ratio",
    "format_us",
    "package_version",
    "source_revision",
    "verdict",
    "write_section",
]


def write_section(path: Path, heading: str, section: str) -> None:
    """Replace the section of ``path`` that starts with the line ``heading``, or append
    it (the file is re-read just now, so a section another benchmark wrote meanwhile
    stays)."""
    if not path.exists():
        path.write_text("# Benchmark results\n\n" + section, encoding="utf-8")
        return
    text = path.read_text(encoding="utf-8")
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


def source_revision() -> str:
    """The commit the code under measurement is at (and whether it has changes beyond
    it): a before and an after are only comparable with it beside them."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=root,
        ).stdout.strip()
        changed = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", "src", "migrations"],
            capture_output=True,
            text=True,
            check=True,
            cwd=root,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head} with uncommitted changes to src/ or migrations/" if changed else head


def verdict(ok: bool) -> str:
    return "**pass**" if ok else "**FAIL**"


def format_ms(value: float) -> str:
    """Milliseconds as the reports print them: µs below 0.1 ms, "–" when not measured."""
    if math.isnan(value):
        return "–"
    return f"{value * 1000:.1f} µs" if value < 0.1 else f"{value:.2f} ms"


def format_us(value: float) -> str:
    return "–" if math.isnan(value) else f"{value:.1f} µs"


def format_ratio(value: float) -> str:
    if math.isnan(value) or math.isinf(value):
        return "–"
    return f"{value:,.0f}×" if value >= 100 else f"{value:.2g}×" if value < 1 else f"{value:.1f}×"
