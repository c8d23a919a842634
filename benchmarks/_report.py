"""What the benchmarks' reports share. Each benchmark owns one ``## ...`` section of
RESULTS.md and rewrites only that, so figures run at different times sit side by side,
each beside the machine and the load it ran under."""

from __future__ import annotations

import math
import platform
import shlex
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from benchmarks._machine import cpu_count, cpu_model, load_average

RESULTS_PATH: Final = Path(__file__).resolve().parent / "RESULTS.md"


def header(module: str, argv: Sequence[str], software: str, load_before: str) -> list[str]:
    """A section's first lines: the command, the machine, the date and the load."""
    command = shlex.join(["python", "-m", f"benchmarks.{module}", *argv])
    return [
        f"- Command: `{command}`",
        f"- Machine: {cpu_count()} CPUs, {cpu_model()}, {platform.system()} "
        f"{platform.release()}; CPython {platform.python_version()}, {software}",
        f"- Date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; load average before / after: "
        f"{load_before}; {load_average()}",
    ]


def write_section(section: str, path: Path = RESULTS_PATH) -> None:
    """Replace the section of ``path`` that starts with the section's first line, or
    append it. The file is read just now, so a section another benchmark wrote meanwhile
    stays."""
    heading = section.partition("\n")[0]
    text = path.read_text(encoding="utf-8")
    head, found, rest = text.partition(heading + "\n")
    if not found:
        head, rest = text.rstrip("\n") + "\n\n", ""
    following = rest.find("\n## ")
    after = "\n" + rest[following + 1 :] if following >= 0 else ""
    path.write_text(head + section + after, encoding="utf-8")
    print(f"written to {path}", file=sys.stderr)


def quantile(values: Sequence[float], q: float) -> float:
    """Nearest rank: the p99 of fewer than 100 values is the largest."""
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q * len(ordered))) - 1]


def verdict(ok: bool) -> str:
    return "**pass**" if ok else "**FAIL**"
