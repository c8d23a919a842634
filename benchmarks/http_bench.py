"""HTTP benchmark of ``DownloadSchedulerMiddleware``: uvicorn with and without it, under wrk.

Run with ``python -m benchmarks.http_bench`` (or ``make bench-http``); ``--help`` lists
the options and ``benchmarks/README.md`` explains the workloads and every figure. Needs
``wrk`` on ``PATH`` (Debian/Ubuntu: ``apt-get install wrk``).

1. The served files are written to a scratch directory, and two uvicorn servers start
   side by side on 127.0.0.1, one process each: the bare host (a Starlette file server
   with ``FileResponse``) and the same host behind the middleware
   (``benchmarks/_http_apps.py``). With two or more CPUs the servers share one CPU and
   wrk gets another (``taskset``), so the load generator never competes with the server
   it measures.
2. For each workload, wrk loads them in many short rounds. Each round runs both
   servers back to back, the order flipping every round (bare–wrapped, wrapped–bare, …),
   so whatever else the shared machine does falls on both alike; the throughput kept is
   the median of the per-round ratios wrapped ÷ bare, shown with its spread. With
   ``--at-once`` both servers are loaded at the same time instead, each by its own wrk,
   and each round's ratio is of the responses served per second of the server's own
   CPU time (see ``benchmarks/README.md``).
3. In process, without a network: the in-memory objects are served directly with a fake
   ``receive``/``send``, bare and wrapped, for the middleware's own cost per request, the
   scheduler's share of it, and a ``cProfile`` of the wrapped path naming where it goes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import datetime
import http.client
import json
import math
import os
import platform
import pstats
import random
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, Final

from arkvory_sched import (
    Admitted,
    ByteRange,
    Delivered,
    DownloadRequest,
    DownloadTarget,
    InMemoryDownloadScheduler,
    RangeKind,
)
from arkvory_sched.asgi._observer import PROGRESS_EVERY_BYTES
from benchmarks._machine import cpu_count, cpu_model, load_average, median
from benchmarks._report import package_version, verdict, write_section

from ._http_apps import (
    CHUNK_SIZE,
    FILE_LARGE_PATH,
    FILE_LARGE_SIZE,
    FILE_SMALL_PATH,
    LARGE_PATH,
    SMALL_PATH,
    SMALL_SIZE,
    ASGIApp,
    Message,
    Scope,
    bare_memory_app,
    benchmark_settings,
    default_http,
    expected_bytes,
    resolve,
    server_environment,
    wrapped_memory_app,
    write_files,
)

__all__ = ["main"]

MIB: Final = 1024 * 1024
HOST: Final = "127.0.0.1"
PROJECT_ROOT: Final = Path(__file__).resolve().parent.parent
RESULTS_PATH: Final = Path(__file__).resolve().parent / "RESULTS.md"
SECTION_HEADING: Final = "## HTTP middleware"
REFERENCE_HEADING: Final = "## HTTP reference: a minimal send wrapper in the middleware's place"
AT_ONCE_HEADING: Final = "## HTTP middleware, both servers loaded at once"

ROUNDS: Final = 30
BLOCKS: Final = 10
DURATION_S: Final = 3
WARMUP_S: Final = 2
MAX_OTHER_LOAD: Final = 0.25  # CPUs other processes may use during a round's runs …
ROUND_ATTEMPTS: Final = 3  # … before the round is run again, at most this many times
QUICK_ROUNDS: Final = 3
QUICK_DURATION_S: Final = 2
WRK_THREADS: Final = 1
READY_TIMEOUT_S: Final = 20.0
BOOTSTRAP_RESAMPLES: Final = 4000  # draws of whole blocks for block_interval
BOOTSTRAP_SEED: Final = 76  # fixed: the same rounds always give the same interval

RANGE_HEADER: Final = f"bytes=0-{8 * MIB - 1}"
DOWNLOAD_ID: Final = "http-bench-session-1"

IN_PROCESS_BATCHES: Final = 9
SATURATED: Final = 0.9  # server CPU use from which the server is the bottleneck
PROFILE_TOP: Final = 10

# The wrk Lua hook: one machine-readable line with the totals and exact percentiles (µs).
WRK_SCRIPT: Final = """\
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"requests":%d,"bytes":%d,"duration_us":%d,"connect":%d,"read":%d,' ..
    '"write":%d,"status":%d,"timeout":%d,"p50":%.1f,"p90":%.1f,"p99":%.1f,' ..
    '"mean":%.1f,"max":%.1f}\\n',
    summary.requests, summary.bytes, summary.duration, e.connect, e.read, e.write,
    e.status, e.timeout, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency.mean, latency.max))
end
"""

WRK_MISSING: Final = """\
wrk (the HTTP load generator) was not found on PATH.
Install it first, for example on Debian or Ubuntu:

    sudo apt-get update && sudo apt-get install -y wrk

(or build it from https://github.com/wg/wrk), then run `make bench-http` again.
`python -m benchmarks.http_bench --no-http` runs only the in-process part without wrk."""


@dataclass(frozen=True, slots=True)
class Workload:
    key: str
    title: str
    path: str
    connections: int
    headers: tuple[tuple[str, str], ...]
    body_size: int
    object_size: int
    status: int
    target_loss: float | None  # the largest throughput loss the issue accepts; None: info
    # Throughput in bytes (wrk counts every byte read, also of responses a run's end cuts
    # off) rather than in completed responses: with a few connections served in turn, the
    # large responses complete nearly together, so a 3 s run's count moves in steps of
    # one response per connection (8 of ~250: 3 %), larger than the effect measured.
    by_bytes: bool = False

    def wrk_args(self, wrk: str, url: str, duration: int, script: Path) -> list[str]:
        args = [wrk, f"-t{WRK_THREADS}", f"-c{self.connections}", f"-d{duration}s", "--latency"]
        for name, value in self.headers:
            args += ["-H", f"{name}: {value}"]
        return [*args, "-s", str(script), url]


SESSION_HEADERS: Final = (("Range", RANGE_HEADER), ("Arkvory-Download-Id", DOWNLOAD_ID))

WORKLOADS: Final = (
    Workload(
        key="small",
        title="1 KiB files, per-request admission",
        path=FILE_SMALL_PATH,
        connections=16,
        headers=(),
        body_size=SMALL_SIZE,
        object_size=SMALL_SIZE,
        status=200,
        target_loss=0.05,
    ),
    Workload(
        key="session",
        title="8 MiB ranges of one active session (64 MiB file)",
        path=FILE_LARGE_PATH,
        connections=8,
        headers=SESSION_HEADERS,
        body_size=8 * MIB,
        object_size=FILE_LARGE_SIZE,
        status=206,
        target_loss=0.02,
        by_bytes=True,
    ),
    Workload(
        key="latency",
        title="1 KiB files, one connection (latency without queueing)",
        path=FILE_SMALL_PATH,
        connections=1,
        headers=(),
        body_size=SMALL_SIZE,
        object_size=SMALL_SIZE,
        status=200,
        target_loss=None,
    ),
    Workload(
        key="memory",
        title="1 KiB from memory, per-request admission (raw ASGI host)",
        path=SMALL_PATH,
        connections=16,
        headers=(),
        body_size=SMALL_SIZE,
        object_size=SMALL_SIZE,
        status=200,
        target_loss=None,
    ),
)
WORKLOAD_KEYS: Final = tuple(w.key for w in WORKLOADS)


# ====================================================================== placement
@dataclass(frozen=True, slots=True)
class Placement:
    """Which CPU the servers and wrk run on (``None``: wherever the kernel puts them)."""

    server_cpu: int | None
    wrk_cpu: int | None

    @property
    def pinned(self) -> bool:
        return self.server_cpu is not None

    def prefix(self, cpu: int | None) -> list[str]:
        return [] if cpu is None else ["taskset", "-c", str(cpu)]

    def describe(self) -> str:
        if self.server_cpu is None:
            return "not pinned (one CPU, no `taskset`, or `--no-pin`)"
        return (
            f"both servers on CPU {self.server_cpu} (`taskset -c {self.server_cpu}`; the "
            f"anyio worker threads of `FileResponse` too), wrk on CPU {self.wrk_cpu}"
        )


def placement(pin: bool) -> Placement:
    """The last allowed CPU for the servers, the first for wrk, when there are two."""
    if not pin or not hasattr(os, "sched_getaffinity") or shutil.which("taskset") is None:
        return Placement(None, None)
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return Placement(None, None)
    return Placement(cpus[-1], cpus[0])


@contextlib.contextmanager
def pinned_to(cpu: int | None) -> Iterator[None]:
    """Run this process on ``cpu`` for a while (the in-process measurements)."""
    if cpu is None or not hasattr(os, "sched_setaffinity"):
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


@dataclass(frozen=True, slots=True)
class Plan:
    """How the HTTP part runs: rounds, blocks of fresh servers, seconds per run, where."""

    rounds: int
    blocks: int
    duration: int
    http_impl: str
    where: Placement
    max_other_load: float = MAX_OTHER_LOAD
    wrapped_app: str = "wrapped"  # the app in the middleware's role: wrapped or reference
    # Both servers loaded at the same time, each round's ratio per server CPU-second
    # (run_http explains why); otherwise one after the other, throughput per second.
    at_once: bool = False

    def rounds_per_block(self) -> list[int]:
        blocks = max(1, min(self.blocks, self.rounds))
        base, extra = divmod(self.rounds, blocks)
        return [base + (1 if index < extra else 0) for index in range(blocks)]


# ====================================================================== servers
def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def process_cpu_times(pid: int) -> tuple[float, float]:
    """User and system CPU time of a running process (Linux ``/proc``); NaN elsewhere.

    Their sum is the kernel's exact run time, to a clock tick; the split between them
    is sampled at each tick, so it is a good estimate over a run of seconds, not exact.
    """
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except OSError:
        return math.nan, math.nan
    fields = text.rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def machine_busy_seconds() -> float:
    """CPU time every process on the machine used, steal included (Linux); NaN elsewhere."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            fields = stat.readline().split()
    except OSError:
        return math.nan
    # user nice system idle iowait irq softirq steal (guest time is inside user/nice)
    busy = sum(int(value) for index, value in enumerate(fields[1:9]) if index not in (3, 4))
    return busy / os.sysconf("SC_CLK_TCK")


class Server:
    """One uvicorn process serving ``bare`` or ``wrapped`` on a free port."""

    def __init__(
        self,
        app: str,
        http_impl: str,
        root: Path,
        log_dir: Path,
        where: Placement,
        factory: str | None = None,
    ) -> None:
        self.app = app
        self.port = free_port()
        self.log_path = log_dir / f"{app}.log"
        self.command = [
            *where.prefix(where.server_cpu),
            sys.executable,
            "-m",
            "benchmarks._http_apps",
            factory or app,
            "--host",
            HOST,
            "--port",
            str(self.port),
            "--http",
            http_impl,
        ]
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            self.command,
            cwd=PROJECT_ROOT,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=server_environment(root),
        )

    def url(self, path: str) -> str:
        return f"http://{HOST}:{self.port}{path}"

    def wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the {self.app} server exited:\n{self.log_text()}")
            with contextlib.suppress(OSError):
                status, _, _ = fetch(self.port, SMALL_PATH, ())
                if status == 200:
                    return
            time.sleep(0.1)
        raise RuntimeError(f"the {self.app} server did not answer in {READY_TIMEOUT_S:g} s")

    def cpu_times(self) -> tuple[float, float]:
        """User and system CPU time, from one reading."""
        return process_cpu_times(self.process.pid)

    def log_text(self) -> str:
        self._log.flush()
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()


def fetch(
    port: int, path: str, headers: Sequence[tuple[str, str]]
) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection(HOST, port, timeout=10)
    try:
        connection.request("GET", path, headers=dict(headers))
        response = connection.getresponse()
        body = response.read()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, body
    finally:
        connection.close()


def check_server(server: Server, wrapped: bool, workloads: Sequence[Workload]) -> None:
    """The workloads' requests answer as the benchmark assumes, on both servers.

    For the wrapped server the range request also makes the download session active,
    so that every range wrk sends later belongs to an active session. Only the workload
    about to run is checked: a session left active by another workload's check would
    make each 1 KiB request of the same account hash a session key as well (to rule out
    that it is a range of that session), which is not what those workloads measure.
    """
    for workload in workloads:
        status, headers, body = fetch(server.port, workload.path, workload.headers)
        problems = []
        if status != workload.status:
            problems.append(f"status {status}, expected {workload.status}")
        if body != expected_bytes(0, workload.body_size):
            problems.append(f"body of {len(body):,} bytes is not the object's first bytes")
        if workload.status == 206:
            expected_range = f"bytes 0-{workload.body_size - 1}/{workload.object_size}"
            if headers.get("content-range") != expected_range:
                problems.append(f"Content-Range {headers.get('content-range')!r}")
        if wrapped != ("arkvory-download-class" in headers):
            problems.append("Arkvory-Download-Class header " + ("missing" if wrapped else "set"))
        if problems:
            raise RuntimeError(f"{server.app} server, {workload.path}: " + "; ".join(problems))


# ====================================================================== wrk
@dataclass(frozen=True, slots=True)
class WrkRun:
    requests: int
    bytes: int
    seconds: float
    errors: int
    status_errors: int
    p50_us: float
    p90_us: float
    p99_us: float
    mean_us: float
    max_us: float
    server_cpu_s: float
    server_user_s: float  # of server_cpu_s, the time in user space (the interpreter)
    wrk_cpu_s: float
    other_cpu_s: float  # every other process on the machine, steal included

    @property
    def bytes_per_s(self) -> float:
        return self.bytes / self.seconds

    @property
    def other_load(self) -> float:
        """CPUs' worth of time other processes used during the run."""
        return max(0.0, self.other_cpu_s / self.seconds)


@dataclass(slots=True)
class _WrkStarted:
    process: subprocess.Popen[str]
    command: Sequence[str]
    server: Server
    server_cpu_before: float
    server_user_before: float


def start_wrk(command: Sequence[str], server: Server) -> _WrkStarted:
    user_before, system_before = server.cpu_times()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return _WrkStarted(process, command, server, user_before + system_before, user_before)


def finish_wrk(started: _WrkStarted) -> WrkRun:
    """The run's figures once wrk exits; ``other_cpu_s`` is left to the caller."""
    process = started.process
    assert process.stdout is not None
    output = process.stdout.read()
    process.stdout.close()
    # Reaped here for wrk's own rusage: with two wrk at once, the children's total that
    # os.times() keeps could not tell them apart.
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    user_after, system_after = started.server.cpu_times()
    server_cpu = user_after + system_after - started.server_cpu_before
    server_user = user_after - started.server_user_before
    line = next((ln for ln in output.splitlines() if ln.startswith("WRKJSON ")), None)
    if process.returncode != 0 or line is None:
        raise RuntimeError(
            f"wrk failed ({process.returncode}): {shlex.join(started.command)}\n{output}"
        )
    data: dict[str, Any] = json.loads(line.removeprefix("WRKJSON "))
    errors = sum(int(data[key]) for key in ("connect", "read", "write", "timeout"))
    return WrkRun(
        requests=int(data["requests"]),
        bytes=int(data["bytes"]),
        seconds=int(data["duration_us"]) / 1e6,
        errors=errors,
        status_errors=int(data["status"]),
        p50_us=float(data["p50"]),
        p90_us=float(data["p90"]),
        p99_us=float(data["p99"]),
        mean_us=float(data["mean"]),
        max_us=float(data["max"]),
        server_cpu_s=server_cpu,
        server_user_s=server_user,
        wrk_cpu_s=usage.ru_utime + usage.ru_stime,
        other_cpu_s=0.0,
    )


def wrk_commands(
    wrk: str,
    prefix: Sequence[str],
    workload: Workload,
    servers: Mapping[str, Server],
    names: Sequence[str],
    seconds: int,
    script: Path,
) -> dict[str, list[str]]:
    """The wrk command of ``workload`` against each server named, in that order."""
    return {
        name: [*prefix, *workload.wrk_args(wrk, servers[name].url(workload.path), seconds, script)]
        for name in names
    }


def run_wrk_each(
    commands: Mapping[str, Sequence[str]], servers: Mapping[str, Server], at_once: bool
) -> dict[str, WrkRun]:
    """One wrk run per server named in ``commands``: one after the other, in that order,
    or all at the same time. ``other_cpu_s`` is what the rest of the machine used over
    each run: over the whole round, less every server and wrk of it, when at once."""
    runs: dict[str, WrkRun] = {}
    if not at_once:
        for name, command in commands.items():
            busy_before = machine_busy_seconds()
            run = finish_wrk(start_wrk(command, servers[name]))
            other = machine_busy_seconds() - busy_before - run.server_cpu_s - run.wrk_cpu_s
            runs[name] = replace(run, other_cpu_s=other)
        return runs
    busy_before = machine_busy_seconds()
    started = {name: start_wrk(command, servers[name]) for name, command in commands.items()}
    finished = {name: finish_wrk(each) for name, each in started.items()}
    ours = sum(run.server_cpu_s + run.wrk_cpu_s for run in finished.values())
    other = machine_busy_seconds() - busy_before - ours
    return {name: replace(run, other_cpu_s=other) for name, run in finished.items()}


def median_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """The order statistics that bracket the median with at least ``confidence``.

    Distribution-free: each value lies below the true median with probability ½, so the
    number below it is binomial(n, ½), and ``[x₍ⱼ₎, x₍ₙ₋ⱼ₊₁₎]`` covers the median unless
    fewer than ``j`` or more than ``n − j`` values fall below it. With fewer than 6
    values no such pair exists and the whole range is returned.
    """
    ordered = sorted(values)
    n = len(ordered)
    tail = (1 - confidence) / 2
    below = 0.0
    j = 0  # the largest j with P(X < j) <= tail, X ~ binomial(n, ½)
    for count in range(n + 1):
        below += math.comb(n, count) / 2**n
        if below > tail:
            j = count
            break
    if j == 0:
        return ordered[0], ordered[-1]
    return ordered[j - 1], ordered[n - j]


def block_interval(
    values: Sequence[float],
    blocks: Sequence[int],
    confidence: float = 0.95,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> tuple[float, float]:
    """A ``confidence`` interval of the median that treats each block as one draw.

    The rounds of one block share a server pair, and a pair's process (its memory
    layout, which CPU caches it shares with what) moves all its rounds together: block
    means of the same code have differed by three points in one run, while the rounds
    within a block scatter less. Rounds are then not independent, and
    :func:`median_interval` over them is too narrow. Here whole blocks are drawn with
    replacement (a cluster bootstrap, seeded so a report can be recomputed) and the
    median of each draw's rounds taken. With fewer than 3 blocks there is nothing to
    resample and the whole range is returned.
    """
    groups: dict[int, list[float]] = {}
    for value, block in zip(values, blocks, strict=True):
        groups.setdefault(block, []).append(value)
    if len(groups) < 3:
        return min(values), max(values)
    members = list(groups.values())
    draw = random.Random(BOOTSTRAP_SEED)
    medians = sorted(
        statistics.median([v for group in draw.choices(members, k=len(members)) for v in group])
        for _ in range(resamples)
    )
    tail = (1 - confidence) / 2
    return medians[int(tail * resamples)], medians[math.ceil((1 - tail) * resamples) - 1]


@dataclass(slots=True)
class HttpResult:
    workload: Workload
    command: str
    bare: list[WrkRun] = field(default_factory=list)
    wrapped: list[WrkRun] = field(default_factory=list)
    bare_first: list[bool] = field(default_factory=list)
    blocks: list[int] = field(default_factory=list)  # which server pair ran each round
    repeated: int = 0  # rounds run again because other processes were busy
    at_once: bool = False  # both servers loaded together: ratios per server CPU-second

    def served(self, run: WrkRun) -> float:
        """Responses' worth a run served: completed responses, or (``by_bytes``) the
        bytes read in units of one response's body."""
        if self.workload.by_bytes:
            return run.bytes / self.workload.body_size
        return float(run.requests)

    def throughput(self, run: WrkRun) -> float:
        """Responses' worth per second (see :meth:`served`)."""
        return self.served(run) / run.seconds

    def cpu_us(self, run: WrkRun) -> float:
        """Server CPU per response's worth served, in µs."""
        served = self.served(run)
        return run.server_cpu_s / served * 1e6 if served else math.nan

    def user_us(self, run: WrkRun) -> float:
        """Server CPU in user space per response's worth served, in µs."""
        served = self.served(run)
        return run.server_user_s / served * 1e6 if served else math.nan

    def kernel_us(self, run: WrkRun) -> float:
        """Server CPU in the kernel per response's worth served, in µs."""
        return self.cpu_us(run) - self.user_us(run)

    def per_cpu_second(self, run: WrkRun) -> float:
        """Responses' worth per second of the server's own CPU time."""
        return self.served(run) / run.server_cpu_s if run.server_cpu_s > 0 else math.nan

    def ratios(self) -> list[float]:
        """Wrapped ÷ bare of each round: throughput of the two runs back to back, or
        (``at_once``) responses per server CPU-second of the two runs at the same time."""
        kept = self.per_cpu_second if self.at_once else self.throughput
        return [kept(w) / kept(b) for b, w in zip(self.bare, self.wrapped, strict=True)]

    @property
    def kept(self) -> float:
        """The median per-round ratio: the throughput the middleware keeps."""
        return median(self.ratios())

    @property
    def loss(self) -> float:
        return 1.0 - self.kept

    def quartiles(self) -> tuple[float, float]:
        ratios = self.ratios()
        if len(ratios) < 2:
            return ratios[0], ratios[0]
        q1, _, q3 = statistics.quantiles(ratios, n=4, method="inclusive")
        return q1, q3

    def interval(self) -> tuple[float, float]:
        """A 95 % interval of the median ratio: the wider of the rounds' distribution-free
        interval and the blocks' bootstrap one (:func:`block_interval`), so neither the
        scatter of rounds nor that of server pairs is left out."""
        ratios = self.ratios()
        low, high = median_interval(ratios)
        if len(set(self.blocks)) >= 3:
            block_low, block_high = block_interval(ratios, self.blocks)
            low, high = min(low, block_low), max(high, block_high)
        return low, high

    def added(self, pick: Callable[[WrkRun], float]) -> float:
        """Median over the rounds of wrapped − bare (paired, as the ratios are)."""
        return median([pick(w) - pick(b) for b, w in zip(self.bare, self.wrapped, strict=True)])

    def runs(self) -> list[WrkRun]:
        return [*self.bare, *self.wrapped]


def run_http(
    wrk: str,
    workloads: Sequence[Workload],
    plan: Plan,
    root: Path,
    script: Path,
    server_logs: dict[str, Counter[str]],
) -> list[HttpResult]:
    """Every workload, in blocks of rounds, each block on a freshly started server pair.

    Two processes running identical code can differ by a few per cent for as long as they
    live (memory layout, hash seeds, which worker threads exist), and alternating rounds
    cannot cancel that. Fresh pairs per block turn it into one more source of noise that
    the median over all rounds averages.

    With ``plan.at_once`` each round loads both servers at the same time, each by its
    own wrk, on the one CPU they share. Whatever slows that CPU during a round (other
    tenants, its clock) then slows both alike, which alternating runs cannot ensure; the
    two need not get equal shares of it, so each side's throughput is divided by its own
    CPU time: responses per server CPU-second, which is what a saturated server serves.
    """
    results = []
    where = plan.where
    prefix = where.prefix(where.wrk_cpu)
    for workload in workloads:
        placeholder = f"http://{HOST}:PORT{workload.path}"
        shown = workload.wrk_args("wrk", placeholder, plan.duration, Path("report.lua"))
        result = HttpResult(workload, shlex.join([*prefix, *shown]), at_once=plan.at_once)
        round_ = 0
        for block, count in enumerate(plan.rounds_per_block(), 1):
            with running_servers(
                plan.http_impl, root, where, workload, plan.wrapped_app
            ) as servers:
                warmups = wrk_commands(
                    wrk, prefix, workload, servers, tuple(servers), WARMUP_S, script
                )
                run_wrk_each(warmups, servers, plan.at_once)
                for _ in range(count):
                    round_ += 1
                    bare_first = round_ % 2 == 1
                    order = ("bare", "wrapped") if bare_first else ("wrapped", "bare")
                    measured = wrk_commands(
                        wrk, prefix, workload, servers, order, plan.duration, script
                    )
                    for attempt in range(ROUND_ATTEMPTS):
                        runs = run_wrk_each(measured, servers, plan.at_once)
                        for name, run in runs.items():
                            _progress(
                                f"[{workload.key}] round {round_}/{plan.rounds} {name:7}: "
                                f"{result.throughput(run):9,.0f} req/s "
                                f"{run.bytes_per_s / MIB:8,.1f} MiB/s  "
                                f"p50 {_lat(run.p50_us)}  p99 {_lat(run.p99_us)}  server CPU "
                                f"{result.cpu_us(run):,.1f} µs/req  other load "
                                f"{run.other_load:.2f}  errors {run.errors + run.status_errors}"
                            )
                        busiest = max(run.other_load for run in runs.values())
                        if (
                            busiest <= plan.max_other_load
                            or attempt == ROUND_ATTEMPTS - 1
                            or result.repeated >= plan.rounds // 2  # a busy spell: go on
                        ):
                            break
                        result.repeated += 1
                        _progress(
                            f"[{workload.key}] round {round_} run again: other processes used "
                            f"{busiest:.2f} CPUs"
                        )
                    result.bare.append(runs["bare"])
                    result.wrapped.append(runs["wrapped"])
                    result.bare_first.append(bare_first)
                    result.blocks.append(block)
                    _progress(f"[{workload.key}] round {round_} ratio {result.ratios()[-1]:.1%}")
                for name, server in servers.items():
                    server_logs.setdefault(name, Counter()).update(server.log_text().splitlines())
        low, high = result.interval()
        _progress(
            f"[{workload.key}] kept {result.kept:.1%} of bare throughput "
            f"(95 % interval of the median {low:.1%}–{high:.1%})"
        )
        results.append(result)
    return results


# ====================================================================== in-process
@dataclass(frozen=True, slots=True)
class InProcessCase:
    key: str
    title: str
    path: str
    headers: tuple[tuple[str, str], ...]
    requests: int  # per batch
    http_key: str  # the HTTP workload whose middleware path this isolates


IN_PROCESS_CASES: Final = (
    InProcessCase(
        "small", "1 KiB from memory, per-request admission", SMALL_PATH, (), 20_000, "small"
    ),
    InProcessCase(
        "session",
        "8 MiB ranges of one active session, from memory",
        LARGE_PATH,
        SESSION_HEADERS,
        300,
        "session",
    ),
)


def scope_for(path: str, headers: Sequence[tuple[str, str]]) -> Scope:
    """A scope as uvicorn's h11 implementation builds it for wrk's request."""
    raw = [(b"host", b"127.0.0.1:8000")]
    raw += [(name.lower().encode(), value.encode()) for name, value in headers]
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "server": (HOST, 8000),
        "client": (HOST, 50_000),
        "scheme": "http",
        "method": "GET",
        "root_path": "",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": raw,
        "state": {},
    }


async def _receive() -> Message:
    return {"type": "http.request", "body": b"", "more_body": False}


async def _discard(message: Message) -> None:
    return None


async def _call_many(app: ASGIApp, scope: Scope, count: int) -> None:
    for _ in range(count):
        await app(dict(scope), _receive, _discard)


async def _call_once(app: ASGIApp, scope: Scope) -> None:
    await app(dict(scope), _receive, _discard)


async def _call_many_in_tasks(app: ASGIApp, scope: Scope, count: int) -> None:
    loop = asyncio.get_running_loop()
    for _ in range(count):
        await loop.create_task(_call_once(app, scope))


@dataclass(slots=True)
class InProcessResult:
    case: InProcessCase
    bare_us: float
    wrapped_us: float
    scheduler_us: float  # the scheduler calls the middleware makes, alone
    bare_task_us: float  # each call in a new task, as uvicorn runs a request
    wrapped_task_us: float

    @property
    def overhead_us(self) -> float:
        return self.wrapped_us - self.bare_us

    @property
    def task_overhead_us(self) -> float:
        return self.wrapped_task_us - self.bare_task_us


def _timed(loop: asyncio.AbstractEventLoop, work: Coroutine[Any, Any, None]) -> float:
    started = time.perf_counter()
    loop.run_until_complete(work)
    return time.perf_counter() - started


def _resolved(case: InProcessCase) -> DownloadTarget:
    async def lookup() -> DownloadTarget | None:
        return await resolve(scope_for(case.path, case.headers))

    target = asyncio.run(lookup())
    if target is None:
        raise RuntimeError(f"the resolver does not know {case.path}")
    return target


async def _fast_round_trips(
    scheduler: InMemoryDownloadScheduler, target: DownloadTarget, count: int
) -> None:
    """What the middleware asks of the scheduler for a small object: a place, given back."""
    for _ in range(count):
        place = scheduler.admit_now(
            target.principal,
            target.principal_kind,
            target.base_class,
            None,
            None,
            target.object_id,
            target.size,
            HOST,
            None,
        )
        if place is None:
            raise RuntimeError("the scheduler had no free per-request place")
        scheduler.release_per_request(place, target.size)


async def _range_round_trips(
    scheduler: InMemoryDownloadScheduler, request: DownloadRequest, count: int
) -> None:
    """What the middleware asks of the scheduler for a further range of an active
    session: the range fast path's grant, and its outcome reported."""
    for _ in range(count):
        state = scheduler.admit_now(
            request.principal,
            request.principal_kind,
            request.base_class,
            None,
            request.download_id,
            request.object_id,
            request.object_size,
            request.client_address,
            request.byte_range,
        )
        if state is None:
            raise RuntimeError("the scheduler did not take the range on its fast path")
        scheduler.report_range(state, Delivered(state.byte_range))


def _scheduler_work(case: InProcessCase) -> Callable[[], Coroutine[Any, Any, None]]:
    target = _resolved(case)
    scheduler = InMemoryDownloadScheduler(benchmark_settings())
    if not case.headers:
        return partial(_fast_round_trips, scheduler, target, case.requests)
    request = DownloadRequest(
        principal=target.principal,
        principal_kind=target.principal_kind,
        object_id=target.object_id,
        object_size=target.size,
        byte_range=ByteRange(0, 8 * MIB, RangeKind.BOUNDED),
        download_id=DOWNLOAD_ID,
        client_address=HOST,
    )
    if not isinstance(scheduler.core.admit(request), Admitted):  # the session is now active
        raise RuntimeError("the scheduler did not start the download session")
    return partial(_range_round_trips, scheduler, request, case.requests)


def measure_in_process(cases: Sequence[InProcessCase]) -> list[InProcessResult]:
    results = []
    for case in cases:
        count = case.requests
        scope = scope_for(case.path, case.headers)
        bare, wrapped = bare_memory_app(), wrapped_memory_app()
        scheduler = _scheduler_work(case)
        loop = asyncio.new_event_loop()
        try:
            for app in (bare, wrapped):  # warm up; the wrapped app's session becomes active
                loop.run_until_complete(_call_many(app, scope, max(10, count // 20)))
            loop.run_until_complete(scheduler())
            works: dict[str, Callable[[], Coroutine[Any, Any, None]]] = {
                "bare": partial(_call_many, bare, scope, count),
                "wrapped": partial(_call_many, wrapped, scope, count),
                "scheduler": scheduler,
                "bare_task": partial(_call_many_in_tasks, bare, scope, count),
                "wrapped_task": partial(_call_many_in_tasks, wrapped, scope, count),
            }
            times: dict[str, list[float]] = {name: [] for name in works}
            for _ in range(IN_PROCESS_BATCHES):
                for name, work in works.items():
                    times[name].append(_timed(loop, work()))
        finally:
            loop.close()
        # The fastest batch: other processes can only ever add time to a batch.
        us = {name: min(values) / count * 1e6 for name, values in times.items()}
        result = InProcessResult(
            case,
            bare_us=us["bare"],
            wrapped_us=us["wrapped"],
            scheduler_us=us["scheduler"],
            bare_task_us=us["bare_task"],
            wrapped_task_us=us["wrapped_task"],
        )
        _progress(
            f"[{case.key}] in-process: bare {result.bare_us:.2f} µs, wrapped "
            f"{result.wrapped_us:.2f} µs, scheduler {result.scheduler_us:.2f} µs; "
            f"a task per call: bare {result.bare_task_us:.2f} µs, wrapped "
            f"{result.wrapped_task_us:.2f} µs"
        )
        results.append(result)
    return results


def h11_extra_header_us() -> float:
    """What h11 spends on the wrapped response's one extra header (1 KiB response).

    A whole request/response exchange on an ``h11.Connection``, with the headers the
    bare host and uvicorn send, with and without ``arkvory-download-class``; NaN
    without h11.
    """
    try:
        import h11  # noqa: PLC0415  (only with uvicorn's h11 implementation)
    except ImportError:
        return math.nan
    base = [
        (b"date", b"Mon, 30 Nov 2026 04:38:48 GMT"),
        (b"server", b"uvicorn"),
        (b"etag", b'"46f33994842514ce89f972e237faf31a"'),
        (b"last-modified", b"Mon, 30 Nov 2026 06:13:56 GMT"),
        (b"content-type", b"application/octet-stream"),
        (b"accept-ranges", b"bytes"),
        (b"content-length", b"1024"),
    ]
    wrapped = [*base, (b"arkvory-download-class", b"release")]
    body = expected_bytes(0, SMALL_SIZE)
    request = b"GET /files/small.bin HTTP/1.1\r\nHost: 127.0.0.1:8000\r\n\r\n"
    count = 5_000

    def exchange(headers: list[tuple[bytes, bytes]]) -> float:
        started = time.perf_counter()
        for _ in range(count):
            connection = h11.Connection(h11.SERVER)
            connection.receive_data(request)
            connection.next_event()
            connection.send(h11.Response(status_code=200, headers=headers))
            connection.send(h11.Data(data=body))
            connection.send(h11.EndOfMessage())
        return time.perf_counter() - started

    exchange(base)
    with_extra = []
    without = []
    for _ in range(IN_PROCESS_BATCHES):
        without.append(exchange(base))
        with_extra.append(exchange(wrapped))
    return (min(with_extra) - min(without)) / count * 1e6


@dataclass(frozen=True, slots=True)
class ProfileEntry:
    where: str
    calls_per_request: float
    own_us: float  # tottime per request, under the profiler
    share: float  # of the profiled total


@dataclass(slots=True)
class ProfileResult:
    case: InProcessCase
    total_us: float
    functions: list[ProfileEntry]
    groups: list[ProfileEntry]


def _group_of(filename: str) -> str:
    path = filename.replace("\\", "/")
    if "/arkvory_sched/" in path:
        return "arkvory_sched/" + path.rsplit("/arkvory_sched/", 1)[1]
    if "/benchmarks/" in path:
        return "benchmark app and driver"
    if "/anyio/" in path:
        return "anyio"
    if "/asyncio/" in path:
        return "asyncio"
    if filename == "~":
        return "built-ins (dict.get, isinstance, len, hashlib …)"
    return "other Python: " + path.rsplit("/", 1)[-1]


def profile_wrapped(case: InProcessCase) -> ProfileResult:
    count = case.requests
    scope = scope_for(case.path, case.headers)
    app = wrapped_memory_app()
    loop = asyncio.new_event_loop()
    profiler = cProfile.Profile()
    try:
        loop.run_until_complete(_call_many(app, scope, max(10, count // 20)))
        profiler.enable()
        loop.run_until_complete(_call_many(app, scope, count))
        profiler.disable()
    finally:
        loop.close()
    stats: dict[tuple[str, int, str], tuple[int, int, float, float, Any]]
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    total = sum(entry[2] for entry in stats.values())
    functions = []
    groups: dict[str, list[float]] = {}
    for (filename, line, name), (_, calls, own, _, _) in stats.items():
        if filename == "~":
            where = name
        else:
            short = _group_of(filename).removeprefix("arkvory_sched/")
            where = f"{short}:{line} {name}"
        functions.append(
            ProfileEntry(where, calls / count, own / count * 1e6, own / total if total else 0.0)
        )
        group = groups.setdefault(_group_of(filename), [0.0, 0.0])
        group[0] += calls
        group[1] += own
    functions.sort(key=lambda e: e.own_us, reverse=True)
    group_entries = [
        ProfileEntry(name, calls / count, own / count * 1e6, own / total if total else 0.0)
        for name, (calls, own) in groups.items()
    ]
    group_entries.sort(key=lambda e: e.own_us, reverse=True)
    return ProfileResult(case, total / count * 1e6, functions, group_entries)


# ====================================================================== report
def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _lat(us: float) -> str:
    if math.isnan(us):
        return "–"
    return f"{us / 1000:.2f} ms" if abs(us) >= 1000 else f"{us:.0f} µs"


def _signed_lat(us: float) -> str:
    sign = "+" if us >= 0 else "−"
    return sign + _lat(abs(us))


def wrk_version(wrk: str) -> str:
    completed = subprocess.run([wrk, "--version"], capture_output=True, text=True, check=False)
    first = (completed.stdout or completed.stderr).strip().splitlines()
    return first[0].split("Copyright")[0].strip() if first else "unknown"


@dataclass(slots=True)
class Run:
    argv: list[str]
    plan: Plan
    wrk: str | None
    http: list[HttpResult]
    in_process: list[InProcessResult]
    h11_header_us: float
    profiles: list[ProfileResult]
    seconds: float
    loads: tuple[str, str]
    server_logs: dict[str, Counter[str]]

    def result(self, key: str) -> HttpResult | None:
        return next((r for r in self.http if r.workload.key == key), None)


def _unresolved(result: HttpResult) -> bool:
    """Whether the target lies inside the 95 % interval of the median ratio."""
    target = result.workload.target_loss
    low, high = result.interval()
    return target is not None and low < 1 - target < high


def _target_rows(run: Run) -> list[str]:
    kept = "Responses per server CPU-second kept" if run.plan.at_once else "Throughput kept"
    rows = [
        f"| Target | {kept} (median of the per-round ratios) "
        "| 95 % interval of the median | interquartile range | lowest–highest round "
        "| Result |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for result in run.http:
        w = result.workload
        if w.target_loss is None:
            continue
        low, high = result.interval()
        q1, q3 = result.quartiles()
        ratios = result.ratios()
        rows.append(
            f"| {w.title}: throughput loss ≤ {w.target_loss:.0%} "
            f"| {result.kept:.1%} ({_loss_text(result.loss)}) | {low:.1%}–{high:.1%} "
            f"| {q1:.1%}–{q3:.1%} | {min(ratios):.1%}–{max(ratios):.1%} "
            f"| {verdict(result.loss <= w.target_loss)}"
            + (
                " (within the noise: the interval contains the target)"
                if _unresolved(result)
                else ""
            )
            + " |"
        )
    return rows


def _http_sections(run: Run) -> list[str]:
    lines = [
        "### Throughput and latency (medians over the rounds)",
        "",
        "| workload | server | req/s | MiB/s | p50 | p90 | p99 | server CPU per request "
        "| server CPU use | wrk CPU use | other processes | errors |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for result in run.http:
        for name, runs in (("bare", result.bare), ("wrapped", result.wrapped)):
            lines.append(
                f"| {result.workload.title} | {name} "
                f"| {median([result.throughput(r) for r in runs]):,.0f} "
                f"| {median([r.bytes_per_s for r in runs]) / MIB:,.1f} "
                f"| {_lat(median([r.p50_us for r in runs]))} "
                f"| {_lat(median([r.p90_us for r in runs]))} "
                f"| {_lat(median([r.p99_us for r in runs]))} "
                f"| {median([result.cpu_us(r) for r in runs]):,.1f} µs "
                f"| {median([r.server_cpu_s / r.seconds for r in runs]):.0%} "
                f"| {median([r.wrk_cpu_s / r.seconds for r in runs]):.0%} "
                f"| {median([r.other_load for r in runs]):.0%} "
                f"| {sum(r.errors + r.status_errors for r in runs)} |"
            )
    lines += [
        "",
        "### What the middleware adds",
        "",
        "Each figure is the median over the rounds of wrapped − bare within a round, the "
        "same pairing as the throughput ratios.",
        "",
        "| workload | throughput kept | added p50 | added p90 | added p99 "
        "| added server CPU per request | added in user space |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for result in run.http:
        lines.append(
            f"| {result.workload.title} | {result.kept:.1%} "
            f"| {_signed_lat(result.added(lambda r: r.p50_us))} "
            f"| {_signed_lat(result.added(lambda r: r.p90_us))} "
            f"| {_signed_lat(result.added(lambda r: r.p99_us))} "
            f"| {_added_cpu(result):+,.1f} µs "
            f"| {result.added(result.user_us):+,.1f} µs |"
        )
    for result in run.http:
        load = result.workload
        bare_rps = median([result.throughput(r) for r in result.bare])
        wrapped_rps = median([result.throughput(r) for r in result.wrapped])
        if load.connections == 1:
            lines += [
                "",
                f"{load.title}: wrk sends one request at a time, so nothing queues and the "
                "added p50 and p99 are what the middleware adds to each request's latency "
                f"(bare p50 {_lat(median([r.p50_us for r in result.bare]))}).",
            ]
            continue
        saturated = median([r.server_cpu_s / r.seconds for r in result.bare]) >= SATURATED
        closed_loop = (
            f"{_lat(load.connections / bare_rps * 1e6)} bare, "
            f"{_lat(load.connections / wrapped_rps * 1e6)} wrapped"
        )
        lines += [
            "",
            f"{load.title}: wrk keeps {load.connections} requests in flight against a "
            + ("saturated server" if saturated else "server that is not saturated here")
            + f", so latency ≈ {load.connections} ÷ throughput ({closed_loop}); the added "
            "latency mirrors the throughput lost, not a delay of each request.",
        ]
        if load.by_bytes:
            lines += [
                "",
                f"{load.title}: throughput, ratios, req/s and CPU per request count the bytes "
                f"wrk read in units of one {load.body_size // MIB} MiB response, responses "
                f"a run's end cut off included. The {load.connections} connections are "
                "served in turn, so their responses complete nearly together and a count of "
                "completed responses would move in steps of one response per connection "
                "(about 3 % of a 3 s run): larger than the effect measured.",
            ]
    lines += [
        "",
        "### Rounds (in run order)",
        "",
        "*Other processes*: CPUs' worth of time the rest of the machine used during each run "
        "(from `/proc/stat`, steal included; the two runs of a round).",
        "",
        "| workload | round | server pair | order | bare req/s | wrapped req/s | ratio (as above) "
        "| bare p50 / p99 | wrapped p50 / p99 | other processes |",
        "| --- | ---: | ---: | --- | ---: | ---: | ---: | --- | --- | --- |",
    ]
    for result in run.http:
        pairs = zip(result.bare, result.wrapped, result.bare_first, result.blocks, strict=True)
        ratios = result.ratios()
        for index, (b, w, bare_first, block) in enumerate(pairs, 1):
            order = "bare, wrapped" if bare_first else "wrapped, bare"
            lines.append(
                f"| {result.workload.key} | {index} | {block} "
                f"| {'at once' if result.at_once else order} "
                f"| {result.throughput(b):,.0f} | {result.throughput(w):,.0f} "
                f"| {ratios[index - 1]:.1%} "
                f"| {_lat(b.p50_us)} / {_lat(b.p99_us)} "
                f"| {_lat(w.p50_us)} / {_lat(w.p99_us)} "
                f"| {b.other_load:.2f} / {w.other_load:.2f} |"
            )
    return lines


def _in_process_sections(run: Run) -> list[str]:
    lines = [
        "### In-process cost per request (no network)",
        "",
        "The in-memory host is called directly with a fake `receive` and a `send` that drops "
        "the message, in one asyncio loop, bare and wrapped, in "
        f"{IN_PROCESS_BATCHES} alternating batches; each figure is the fastest batch (other "
        "processes can only add time), per request. *Scheduler* is the scheduler calls the "
        "middleware makes, alone: for a 1 KiB object the fast path "
        "(`admit_now` + `release_per_request`), for a further range of the active session "
        "the range fast path (`admit_now` + `report_range(state, Delivered(...))`). The "
        "rest of the overhead is the adapter. "
        "uvicorn runs each request in a new task; the last column does the same.",
        "",
        "| workload | requests per batch | bare host | wrapped | overhead | of which scheduler "
        "| adapter | overhead with a new task per call |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in run.in_process:
        lines.append(
            f"| {r.case.title} | {r.case.requests:,} | {r.bare_us:.2f} µs "
            f"| {r.wrapped_us:.2f} µs | {r.overhead_us:.2f} µs | {r.scheduler_us:.2f} µs "
            f"| {r.overhead_us - r.scheduler_us:.2f} µs "
            f"| {r.task_overhead_us:.2f} µs ({r.bare_task_us:.2f} → {r.wrapped_task_us:.2f}) |"
        )
    if not math.isnan(run.h11_header_us):
        lines += [
            "",
            "The wrapped response carries one more header (`arkvory-download-class`); h11 "
            f"alone spends {run.h11_header_us:.2f} µs on it per response.",
        ]
    for profile in run.profiles:
        case = profile.case
        lines += [
            "",
            f"### Profile: wrapped, {case.title}",
            "",
            f"`cProfile` over {case.requests:,} in-process requests: "
            f"{profile.total_us:.1f} µs per request under the profiler (the profiler inflates "
            "small calls, so read the shares, not the absolute times).",
            "",
            "| where (own time, grouped by file) | calls per request | own µs per request "
            "| share |",
            "| --- | ---: | ---: | ---: |",
        ]
        lines += [
            f"| {g.where} | {g.calls_per_request:,.1f} | {g.own_us:.2f} | {g.share:.1%} |"
            for g in profile.groups
        ]
        lines += [
            "",
            f"| top {PROFILE_TOP} functions by own time | calls per request | own µs per request "
            "| share |",
            "| --- | ---: | ---: | ---: |",
        ]
        lines += [
            f"| `{f.where}` | {f.calls_per_request:,.2f} | {f.own_us:.2f} | {f.share:.1%} |"
            for f in profile.functions[:PROFILE_TOP]
        ]
    return lines


def _top_groups(profile: ProfileResult | None) -> str:
    if profile is None:
        return "–"
    top = [g for g in profile.groups if g.where != "benchmark app and driver"][:4]
    return "; ".join(f"{g.where.removeprefix('arkvory_sched/')} {g.share:.0%}" for g in top)


def _loss_text(loss: float) -> str:
    return f"{loss:.1%} loss" if loss >= 0 else f"no loss ({-loss:.1%} faster)"


def _cpu(result: HttpResult, runs: Sequence[WrkRun]) -> float:
    return median([result.cpu_us(r) for r in runs])


def _added_cpu(result: HttpResult) -> float:
    return result.added(result.cpu_us)


def _verdict_text(result: HttpResult) -> str:
    target = result.workload.target_loss or 0.0
    text = f"throughput kept {result.kept:.1%}, so the target is " + (
        "met" if result.loss <= target else "missed"
    )
    if _unresolved(result):
        low, high = result.interval()
        text += (
            f", but the 95 % interval of the median ({low:.1%}–{high:.1%}) contains the "
            f"{1 - target:.0%} line: this run alone does not resolve it"
        )
    return text


def _analysis_section(run: Run) -> list[str]:
    """Where the time goes, for each target, from the figures above (no fixed claims)."""
    lines = ["### Where the time goes", ""]
    in_process = {r.case.http_key: r for r in run.in_process}
    profiles = {p.case.http_key: p for p in run.profiles}
    memory = run.result("memory")
    for result in run.http:
        w = result.workload
        if w.target_loss is None:
            continue
        share = w.target_loss / (1 - w.target_loss)
        bare_cpu = _cpu(result, result.bare)
        use = median([r.server_cpu_s / r.seconds for r in result.bare])
        ip = in_process.get(w.key)
        text = (
            f"**{w.title}.** The bare server spends {bare_cpu:,.1f} µs of CPU per request: "
            "uvicorn and h11, Starlette's routing, and `FileResponse` with its file I/O in "
            f"worker threads. It runs at {use:.0%} of its CPU, so "
            + (
                "its CPU time per request sets its throughput"
                if use >= SATURATED
                else "part of the time it waits, for wrk or for a CPU others hold"
            )
            + f". A loss of at most {w.target_loss:.0%} leaves the middleware "
            f"{bare_cpu * share:,.1f} µs per request. Measured: {_verdict_text(result)}; the "
            f"added server CPU per request is {_added_cpu(result):+,.1f} µs (median of the "
            "per-round differences)."
        )
        if ip is not None:
            text += (
                f" In process, around an in-memory object, the middleware adds "
                f"{ip.overhead_us:.1f} µs per request: {ip.scheduler_us:.1f} µs in the "
                f"scheduler and {ip.overhead_us - ip.scheduler_us:.1f} µs in the adapter "
                f"(profile, own time: {_top_groups(profiles.get(w.key))})."
            )
        lines += [text, ""]
        if w.key == "small" and memory is not None:
            m_added = _added_cpu(memory)
            m_bare = _cpu(memory, memory.bare)
            factor = (
                f" ({m_added / ip.overhead_us:.1f}× the in-process figure: between h11, "
                "asyncio and the socket calls the same code runs slower than in a tight loop, "
                "with its code and data no longer in the CPU's caches, and h11 serialises one "
                "more header"
                + (f", {run.h11_header_us:.1f} µs" if not math.isnan(run.h11_header_us) else "")
                + ")"
                if ip is not None and ip.overhead_us > 0
                else ""
            )
            lines += [
                "A second reading with less noise: single runs of the file server vary by "
                "several per cent, tens of µs per request, so the direct difference is "
                "uncertain by more than the middleware costs. On the raw in-memory host "
                f"({m_bare:,.1f} µs per request) the same middleware path costs "
                f"{m_added:+,.1f} µs of server CPU per request{factor}. Added to the file "
                f"server's {bare_cpu:,.1f} µs that is a loss of "
                f"{m_added / (bare_cpu + m_added):.1%}. The file host's resolver also builds a "
                "`DownloadTarget` per request (a microsecond or two); that is in the direct "
                "measurement only.",
                "",
                "What limits it: the host's own cost per request. The middleware's cost per "
                f"small object is fixed, about {max(m_added, 0.0):,.0f} µs of server CPU, so its "
                "share falls as the host does more: the loss stays within "
                f"{w.target_loss:.0%} for any host that spends at least "
                f"{max(m_added, 0.0) / share:,.0f} µs of CPU per request. The file server "
                f"here spends {bare_cpu:,.0f} µs, "
                + ("enough" if bare_cpu * share >= m_added else "not enough")
                + f"; the raw in-memory host, the cheapest possible, spends {m_bare:,.0f} µs "
                "(below).",
                "",
            ]
        elif ip is not None and w.body_size >= CHUNK_SIZE:  # the 8 MiB ranges
            chunks = w.body_size // CHUNK_SIZE
            rest = ip.overhead_us - ip.scheduler_us
            measured = _added_cpu(result) / bare_cpu
            lines += [
                f"What limits it: a range is {chunks} messages of {CHUNK_SIZE // 1024} KiB "
                "(`FileResponse`'s chunk), and each passes through the response observer, "
                "one more coroutine before uvicorn's `send`; the range is admitted and "
                "reported once (the in-memory scheduler's range fast path, ADR 0013), and "
                f"progress goes to the scheduler every {PROGRESS_EVERY_BYTES // MIB} MiB. In "
                f"process that is {rest:.1f} µs in the adapter ({rest / chunks:.2f} µs per "
                f"message) and {ip.scheduler_us:.1f} µs in the scheduler: "
                f"{ip.overhead_us / bare_cpu:.1%} of the {bare_cpu:,.0f} µs the server spends "
                "per range. The added server CPU measured above is "
                f"{measured:.1%} of it, against {w.target_loss:.0%} allowed"
                + (
                    ": several times the in-process cost, because in the running server each "
                    "range's admission and report, and each message's bookkeeping, run with "
                    "the CPU caches full of the bytes just sent."
                    if measured > 2 * ip.overhead_us / bare_cpu
                    else "."
                )
                + " Split (medians of the per-round differences): "
                f"{result.added(result.user_us):+,.1f} µs per range in user space, where the "
                f"middleware's code runs, and {result.added(result.kernel_us):+,.1f} µs in the "
                "kernel (socket and file copies, the same system calls on both sides); the "
                "split is sampled at each clock tick, so it is an estimate.",
                "",
            ]
    if memory is not None:
        share = 0.05 / 0.95
        m_added = _added_cpu(memory)
        m_bare = _cpu(memory, memory.bare)
        lines += [
            f"**{memory.workload.title}** (no target; the worst case). The bare host spends "
            f"{m_bare:,.1f} µs per request, nearly all of it in uvicorn, h11, asyncio and the "
            f"kernel; the middleware adds {m_added:+,.1f} µs, so it keeps {memory.kept:.1%} of "
            f"the throughput. A 5 % loss here would leave the whole middleware path, resolver "
            f"included, {m_bare * share:,.1f} µs of server CPU.",
            "",
        ]
    latency = run.result("latency")
    if latency is not None:
        lines += [
            "**Added latency.** With one connection nothing queues, and the middleware adds "
            f"{_signed_lat(latency.added(lambda r: r.p50_us))} at p50 and "
            f"{_signed_lat(latency.added(lambda r: r.p99_us))} at p99 to a 1 KiB file request "
            f"(bare: p50 {_lat(median([r.p50_us for r in latency.bare]))}, p99 "
            f"{_lat(median([r.p99_us for r in latency.bare]))}; p99 differences of single "
            "runs are noisy). Under load the added latency is the throughput lost (table above).",
            "",
        ]
    return lines


def section_heading(plan: Plan) -> str:
    """The RESULTS.md heading of a run: each kind of run keeps its own section."""
    if plan.wrapped_app == "reference":
        return REFERENCE_HEADING + (", both servers loaded at once" if plan.at_once else "")
    return AT_ONCE_HEADING if plan.at_once else SECTION_HEADING


def render(run: Run) -> str:
    now = datetime.datetime.now(datetime.UTC)
    command = shlex.join(["python", "-m", "benchmarks.http_bench", *run.argv])
    cfg = benchmark_settings()
    others = [r.other_load for result in run.http for r in result.runs()]
    reference = run.plan.wrapped_app == "reference"
    at_once = run.plan.at_once
    lines = [
        section_heading(run.plan),
        "",
        f"- Command: `{command}` (from the project root, in `.venv`); whole run "
        f"{run.seconds:.0f} s",
        f"- Machine: {cpu_count()} CPUs (`nproc`), {cpu_model()}, "
        f"{platform.system()} {platform.release()}, shared with other work; placement: "
        f"{run.plan.where.describe()}",
        f"- Python: {platform.python_implementation()} {platform.python_version()}, "
        f"uvicorn {package_version('uvicorn')} (`--http {run.plan.http_impl}`, "
        f"{run.plan.http_impl} {package_version(run.plan.http_impl)}, `--loop asyncio`), "
        f"Starlette {package_version('starlette')}, anyio {package_version('anyio')}; "
        f"{run.wrk or 'wrk not run'}",
        f"- Date: {now:%Y-%m-%d %H:%M} UTC; load average (1 / 5 / 15 min) "
        f"{run.loads[0]} before, {run.loads[1]} after"
        + (
            f"; other processes used a median {median(others):.2f} CPUs during the runs "
            f"(highest {max(others):.2f})"
            if others
            else ""
        ),
        "- Host (both sides): a Starlette app whose route looks the file up (`os.stat` in a "
        "worker thread, ETag and Last-Modified as `FileResponse` derives them, once per "
        "request, shared with the resolver through `scope['state']`) and answers with "
        f"`FileResponse` ({CHUNK_SIZE // 1024} KiB chunks read in worker threads); files "
        "`small.bin` (1 KiB) and `large.bin` (64 MiB) in a scratch directory; plus "
        "`/objects/small.bin` from memory (raw ASGI)",
        (
            "- Wrapped (in this run): `benchmarks._http_apps.reference_app`, a pure-ASGI "
            "wrapper of `send` that adds the `Arkvory-Download-Class` header and counts the "
            "body's bytes, nothing else, in the middleware's place; *wrapped* below means it. "
            "The in-process part is the middleware's, as in the main section. "
            if reference
            else ""
        )
        + "- Wrapped: `DownloadSchedulerMiddleware` over "
        f"`InMemoryDownloadScheduler(SchedulerSettings(max_downloads={cfg.max_downloads}, "
        f"transfer_queue_limit={cfg.transfer_queue_limit}, "
        f"transfer_queue_per_principal={cfg.transfer_queue_per_principal}, "
        f"sessions={cfg.sessions}, ranges_per_session={cfg.ranges_per_session}), "
        "ticket_keys=[generate_key()])`, tick loop in the lifespan; the resolver returns a "
        "`DownloadTarget` (service account, class `release`) built from the shared lookup",
    ]
    if run.http:
        lines.append(
            "- Servers: `uvicorn --factory benchmarks._http_apps:"
            f"{{bare_app,{run.plan.wrapped_app}_app}} "
            f"--host 127.0.0.1 --workers 1 --loop asyncio --http {run.plan.http_impl} "
            "--lifespan on --no-access-log` (started through `uvicorn.run` by `python -m "
            "benchmarks._http_apps`), side by side, "
            + (
                "loaded at the same time, each by its own wrk"
                if at_once
                else "each idle while the other is loaded"
            )
        )
        plan = run.plan
        blocks = plan.rounds_per_block()
        lines.append(
            f"- Rounds: {plan.rounds} per workload, each one run of {plan.duration} s on each "
            + (
                "server, both at the same time; the rounds run in "
                if at_once
                else "server back to back, the order flipping every round; the rounds run in "
            )
            + f"{len(blocks)} blocks of {'/'.join(str(b) for b in blocks)}, each on a freshly "
            f"started server pair after a {WARMUP_S} s warm-up of each. A round during which "
            f"other processes used more than {plan.max_other_load:.2f} CPUs is run again, at "
            f"most {ROUND_ATTEMPTS - 1} times and for at most half the rounds ("
            + ", ".join(f"{r.workload.key}: {r.repeated}" for r in run.http)
            + " rounds run again); wrk commands (PORT is the server's):"
        )
        lines += [f"  - `{r.command}`" for r in run.http]
        if at_once:
            lines.append(
                "- Each round's ratio is wrapped ÷ bare of the responses served per second of "
                "the server's own CPU time (`/proc/PID/stat`), so a different share of the CPU "
                "they share does not count. Both servers share one CPU here, so their req/s "
                "and latencies below are each about half a CPU's: the latency the middleware "
                "adds is in the main section's figures, not these."
            )
        lines += ["", "### Targets", "", *_target_rows(run), "", *_http_sections(run)]
    else:
        lines += ["", "(HTTP part not run: `--no-http`.)"]
    lines += ["", *_in_process_sections(run)]
    if run.http:
        lines += ["", *_analysis_section(run)]
    while lines and not lines[-1]:
        lines.pop()
    if run.http:
        logs = "; ".join(
            f"{name}: "
            + (
                ", ".join(f"{count:,}× `{line.strip()[:80]}`" for line, count in log.most_common(3))
                or "empty"
            )
            for name, log in run.server_logs.items()
        )
        lines += [
            "",
            "Errors count wrk's connect/read/write/timeout errors and responses with a status "
            "of 400 or more (a `503` or `429` from the middleware would show here); they must "
            "be 0. Server CPU comes from `/proc/PID/stat` around each wrk run, wrk's from its "
            "rusage. Server logs (at warning level; asyncio logs `socket.send() raised "
            "exception.` when wrk closes its connections in the middle of 8 MiB bodies at the "
            f"end of each run): {logs}.",
        ]
    lines.append("")
    return "\n".join(lines)


# ====================================================================== main
def parse_workloads(text: str) -> tuple[Workload, ...]:
    keys = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [key for key in keys if key not in WORKLOAD_KEYS]
    if unknown or not keys:
        raise argparse.ArgumentTypeError(f"workloads are {', '.join(WORKLOAD_KEYS)}")
    return tuple(w for w in WORKLOADS if w.key in keys)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.http_bench",
        description="uvicorn with and without DownloadSchedulerMiddleware, under wrk.",
    )
    parser.add_argument(
        "--rounds", type=int, default=None, help=f"rounds per workload (default {ROUNDS})"
    )
    parser.add_argument(
        "--blocks",
        type=int,
        default=None,
        help=f"fresh server pairs per workload, the rounds split among them (default {BLOCKS})",
    )
    parser.add_argument(
        "--duration", type=int, default=None, help=f"seconds per wrk run (default {DURATION_S})"
    )
    parser.add_argument(
        "--workloads",
        type=parse_workloads,
        default=WORKLOADS,
        help=f"comma-separated, from {','.join(WORKLOAD_KEYS)} (default all)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"{QUICK_ROUNDS} rounds of {QUICK_DURATION_S} s, print only (unless --output)",
    )
    parser.add_argument(
        "--no-http", action="store_true", help="only the in-process part (no wrk, no uvicorn)"
    )
    parser.add_argument(
        "--max-other-load",
        type=float,
        default=MAX_OTHER_LOAD,
        help="run a round again (up to twice) when other processes used more CPUs than this "
        f"during it (default {MAX_OTHER_LOAD})",
    )
    parser.add_argument(
        "--no-pin",
        action="store_true",
        help="do not pin the servers and wrk to separate CPUs",
    )
    parser.add_argument(
        "--http",
        choices=("h11", "httptools"),
        default=None,
        help="uvicorn's HTTP implementation (default httptools when installed, else h11)",
    )
    parser.add_argument(
        "--reference",
        action="store_true",
        help="put benchmarks._http_apps.reference_app (a send wrapper that adds one header "
        "and counts bytes) in the middleware's place; written under a heading of its own",
    )
    parser.add_argument(
        "--at-once",
        action="store_true",
        help="load both servers at the same time, each by its own wrk, and compare responses "
        "per server CPU-second; written under a heading of its own",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help="markdown file to update (default benchmarks/RESULTS.md, none with --quick)",
    )
    return parser


@contextlib.contextmanager
def running_servers(
    http_impl: str, root: Path, where: Placement, workload: Workload, wrapped_app: str
) -> Iterator[dict[str, Server]]:
    """Both servers, started side by side and checked for ``workload``; stopped after."""
    with tempfile.TemporaryDirectory(prefix="arkvory-http-bench-") as log_dir:
        servers: dict[str, Server] = {}
        try:
            for name in ("bare", "wrapped"):
                factory = wrapped_app if name == "wrapped" else name
                servers[name] = Server(name, http_impl, root, Path(log_dir), where, factory)
            for name, server in servers.items():
                server.wait_ready()
                check_server(server, name == "wrapped", (workload,))
            yield servers
        finally:
            for server in servers.values():
                server.stop()


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(args_list)
    wrk = None if args.no_http else shutil.which("wrk")
    if wrk is None and not args.no_http:
        print(WRK_MISSING, file=sys.stderr)
        return 2
    rounds: int = args.rounds or (QUICK_ROUNDS if args.quick else ROUNDS)
    duration: int = args.duration or (QUICK_DURATION_S if args.quick else DURATION_S)
    output: Path | None = args.output or (None if args.quick else RESULTS_PATH)
    http_impl: str = args.http or default_http()
    workloads: tuple[Workload, ...] = args.workloads
    blocks: int = args.blocks or (1 if args.quick else BLOCKS)
    where = placement(not args.no_pin)
    plan = Plan(
        rounds,
        blocks,
        duration,
        http_impl,
        where,
        args.max_other_load,
        "reference" if args.reference else "wrapped",
        args.at_once,
    )
    load_before = load_average()
    started = time.perf_counter()
    http_results: list[HttpResult] = []
    server_logs: dict[str, Counter[str]] = {}
    if wrk is not None:
        with tempfile.TemporaryDirectory(prefix="arkvory-wrk-") as scratch:
            root = Path(scratch) / "files"
            write_files(root)
            script = Path(scratch) / "report.lua"
            script.write_text(WRK_SCRIPT, encoding="utf-8")
            _progress(f"uvicorn --http {http_impl} --loop asyncio; {where.describe()}")
            http_results = run_http(wrk, workloads, plan, root, script, server_logs)
    _progress("in-process timing …")
    with pinned_to(where.server_cpu):
        in_process = measure_in_process(IN_PROCESS_CASES)
        h11_header = h11_extra_header_us()
        _progress("profiling …")
        profiles = [profile_wrapped(case) for case in IN_PROCESS_CASES]
    run = Run(
        argv=args_list,
        plan=plan,
        wrk=wrk_version(wrk) if wrk is not None else None,
        http=http_results,
        in_process=in_process,
        h11_header_us=h11_header,
        profiles=profiles,
        seconds=time.perf_counter() - started,
        loads=(load_before, load_average()),
        server_logs=server_logs,
    )
    section = render(run)
    print(section)
    if output is not None:
        write_section(output, section_heading(plan), section)
        _progress(f"written to {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
