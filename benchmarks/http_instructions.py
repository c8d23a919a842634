"""Instructions a real uvicorn server executes per response, bare and with the middleware:
``python -m benchmarks.http_instructions`` (``make bench-instructions``; needs valgrind and
curl).

Two wall-clock runs of one server on this shared machine differ by more than the 2 % a
middleware may cost an 8 MiB range (ADR 0014), so this counts instead: each server of
``http_bench`` runs under callgrind (every thread, the interpreter and its libraries) and
curl downloads a fixed number of responses. Under valgrind a response takes about fifty
times longer, so timers (uvicorn's housekeeping, the middleware's tick) would count fifty
times too often: each server is also counted idle, and that rate times the load's
duration is taken off the load's count.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from statistics import median
from typing import Final

from benchmarks._http_apps import write_files
from benchmarks._machine import load_average
from benchmarks._report import header, write_section
from benchmarks.http_bench import HOST, RANGE_HEADER, WORKLOADS, Workload, default_http, server

HEADING: Final = "## HTTP middleware, instructions per response (callgrind)"
APPS: Final = ("bare", "wrapped")
REPEATS: Final = 2  # servers per app and workload
IDLE_SECONDS: Final = 8.0
TICKS_PER_SECOND: Final = 2.0  # the middleware's tick loop at its base interval
# Responses counted per workload, after a warm-up that also starts the wrapped server's
# download session.
WARMUP: Final = {"session": 4, "small": 50}
REQUESTS: Final = {"session": 24, "small": 400}


@dataclass(frozen=True, slots=True)
class Count:
    """One server's counts: the load, and the idle rate taken off it."""

    app: str
    workload: Workload
    load_instructions: int
    load_seconds: float
    idle_instructions: int
    idle_seconds: float

    @property
    def idle_rate(self) -> float:
        return self.idle_instructions / self.idle_seconds

    @property
    def per_request(self) -> float:
        """Instructions per response, net of what the server does while idle."""
        net = self.load_instructions - self.idle_rate * self.load_seconds
        return net / REQUESTS[self.workload.key]


def _control(command: str, pid: int) -> None:
    subprocess.run(["callgrind_control", command, str(pid)], check=True, capture_output=True)


def _dumped_instructions(scratch: Path, prefix: str, before: set[Path]) -> int:
    """The instruction total of the dump callgrind wrote after ``before`` was listed."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        new = sorted(set(scratch.glob(prefix + "*")) - before)
        for path in new:
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                if line.startswith("summary:"):
                    return int(line.split()[1])
        time.sleep(0.2)
    raise RuntimeError(f"callgrind wrote no dump for {prefix}")


def _curl(port: int, workload: Workload, count: int, scratch: Path) -> None:
    """Download ``count`` responses on one keep-alive connection; check every one."""
    config = scratch / f"curl-{port}-{count}.txt"
    url = f"http://{HOST}:{port}{workload.path}"
    config.write_text(f'url = "{url}"\noutput = "/dev/null"\n' * count, encoding="utf-8")
    headers = [arg for name, value in workload.headers for arg in ("-H", f"{name}: {value}")]
    done = subprocess.run(
        ["curl", "-sS", *headers, "-K", str(config), "-w", "%{http_code} %{size_download}\n"],
        check=True,
        capture_output=True,
        text=True,
    )
    expected = f"{workload.status} {workload.body_size}"
    answers = done.stdout.split("\n")[:-1]
    if answers != [expected] * count:
        wrong = sorted({answer for answer in answers if answer != expected})
        raise RuntimeError(f"expected {count} × {expected!r}, got {wrong or answers[:3]}")


def measure(app: str, workload: Workload, root: Path, scratch: Path) -> Count:
    """Start ``app`` under callgrind, warm it up, count it idle, then under load."""
    prefix = f"callgrind-{app}-{workload.key}-{time.monotonic_ns()}"
    valgrind = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={scratch / prefix}.%p"]
    # The interpreter starts slowly under valgrind.
    with server(app, root, scratch, valgrind, ready_s=300.0) as (process, port):
        _curl(port, workload, WARMUP[workload.key], scratch)  # the wrapped session starts here

        def counted(action: Callable[[], None]) -> tuple[int, float]:
            before = set(scratch.glob(prefix + "*"))
            _control("--zero", process.pid)
            started = time.monotonic()
            action()
            seconds = time.monotonic() - started
            _control("--dump", process.pid)
            return _dumped_instructions(scratch, prefix, before), seconds

        idle, idle_seconds = counted(lambda: time.sleep(IDLE_SECONDS))
        load, load_seconds = counted(lambda: _curl(port, workload, REQUESTS[workload.key], scratch))
    return Count(app, workload, load, load_seconds, idle, idle_seconds)


def render(counts: Sequence[Count], load_before: str) -> str:
    valgrind = subprocess.run(["valgrind", "--version"], capture_output=True, text=True, check=True)
    software = f"uvicorn {version('uvicorn')} ({default_http()}), {valgrind.stdout.strip()}"
    lines = [
        HEADING,
        "",
        *header("http_instructions", [], software, load_before),
        "",
        "Each server runs under callgrind; curl downloads the responses on one keep-alive "
        "connection (every status and size checked). Instructions per response are the "
        f"load's count less the server's idle rate (counted for {IDLE_SECONDS:g} s) times "
        f"the load's duration; the median of {REPEATS} servers. `wrapped` is the middleware "
        f"on the in-memory scheduler with tickets; the range workload sends `Range: "
        f"{RANGE_HEADER}` and a download id, so every range counted is a further range of "
        "the active session.",
        "",
        "| workload | server | responses | instructions per response | added vs bare "
        "| idle instructions per second |",
        "|---|---|---:|---:|---:|---:|",
    ]
    summary = []
    for workload in WORKLOADS:
        group = {app: [c for c in counts if (c.workload, c.app) == (workload, app)] for app in APPS}
        bare = median([c.per_request for c in group["bare"]])
        for app in APPS:
            value = median([c.per_request for c in group[app]])
            share = value / bare - 1
            added = "" if app == "bare" else f"{share * 100:+.2f} %"
            lines.append(
                f"| {workload.title} | {app} | {REQUESTS[workload.key]} | {value:,.0f} "
                f"| {added} | {median([c.idle_rate for c in group[app]]):,.0f} |"
            )
        summary.append(
            f"- {workload.title}: the middleware adds {share * 100:.2f} % of the server's "
            f"instructions per response (the target allows a {workload.target_loss:.0%} "
            "throughput loss)."
        )
    idle = {app: median([c.idle_rate for c in counts if c.app == app]) for app in APPS}
    summary.append(
        f"- The tick loop, from the idle rates: about "
        f"{(idle['wrapped'] - idle['bare']) / TICKS_PER_SECOND:,.0f} instructions per tick, "
        f"{TICKS_PER_SECOND:g} ticks a second whatever the load (taken off the load's count "
        "with the rest of the idle rate)."
    )
    limits = (
        "A count is work, not time: kernel time and what cache misses and context switches "
        'cost are not in it (the wall-clock run, section "HTTP middleware", shows them).'
    )
    return "\n".join([*lines, "", *summary, "", limits, ""])


def main() -> int:
    missing = [tool for tool in ("valgrind", "callgrind_control", "curl") if not shutil.which(tool)]
    if missing:
        print(f"needs {', '.join(missing)} on PATH", file=sys.stderr)
        return 2
    load_before = load_average()
    with tempfile.TemporaryDirectory(prefix="arkvory-callgrind-") as scratch_name:
        scratch = Path(scratch_name)
        root = scratch / "files"
        write_files(root)
        jobs = [(app, w) for _ in range(REPEATS) for w in WORKLOADS for app in APPS]
        # Two servers at a time: a count does not depend on what else the machine runs.
        with ThreadPoolExecutor(max_workers=2) as pool:
            counts = list(pool.map(lambda job: measure(job[0], job[1], root, scratch), jobs))
    for count in counts:
        print(
            f"[{count.workload.key}] {count.app}: {count.per_request:,.0f} instructions "
            f"per response (load {count.load_instructions:,} in {count.load_seconds:.1f} s, "
            f"idle {count.idle_rate:,.0f}/s)",
            flush=True,
        )
    section = render(counts, load_before)
    print(section)
    write_section(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
