"""The machine a benchmark ran on, printed beside its figures: on a shared machine a time
is only comparable with the machine and its load next to it."""

from __future__ import annotations

import os
from pathlib import Path


def cpu_count() -> int:
    return len(os.sched_getaffinity(0))


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
        name, _, value = line.partition(":")
        if name.strip() == "model name":
            return value.strip()
    return "unknown"


def load_average() -> str:
    return " / ".join(f"{value:.2f}" for value in os.getloadavg())
