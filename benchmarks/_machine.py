"""What every benchmark report records about the machine, and the one summary statistic
they share: results are only comparable with the machine and its load beside them."""

from __future__ import annotations

import math
import os
import platform
import statistics
from collections.abc import Sequence

__all__ = ["cpu_count", "cpu_model", "load_average", "median", "process_memory"]


def cpu_count() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                name, _, value = line.partition(":")
                if name.strip() == "model name":
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def load_average() -> str:
    try:
        return " / ".join(f"{value:.2f}" for value in os.getloadavg())
    except OSError:
        return "unknown"


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else math.nan


def process_memory() -> tuple[int, int]:
    """This process's resident set now and at its peak (``VmRSS``, ``VmHWM``), in bytes;
    (0, 0) where /proc does not tell."""
    found = {"VmRSS": 0, "VmHWM": 0}
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                name, _, value = line.partition(":")
                if name in found:
                    found[name] = int(value.split()[0]) * 1024  # reported in kB
    except (OSError, ValueError, IndexError):
        return 0, 0
    return found["VmRSS"], found["VmHWM"]
