"""HTTP benchmark of ``DownloadSchedulerMiddleware``: uvicorn with and without it, under wrk.

Run with ``python -m benchmarks.http_bench`` (or ``make bench-http``); ``--help`` lists
the options and ``benchmarks/README.md`` explains the workloads and every figure. Needs
``wrk`` on ``PATH`` (Debian/Ubuntu: ``apt-get install wrk``).

1. Two uvicorn servers start side by side on 127.0.0.1, one process each: the bare object
   server and the same server behind the middleware (``benchmarks/_http_apps.py``).
2. For each workload, wrk loads them in alternating rounds (bare, wrapped, bare, …) so
   that whatever else the shared machine does falls on both alike; the figures are the
   medians over the rounds, and the ratio wrapped / bare is the throughput kept.
3. In-process, without a network: both apps are called directly with a fake
   ``receive``/``send`` to get the middleware's own cost per request, the scheduler's
   share of it, and a ``cProfile`` of the wrapped path naming where the time goes.
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
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Final

import anyio

from arkvory_sched import (
    Admitted,
    ByteRange,
    Delivered,
    DownloadRequest,
    DownloadTarget,
    InMemoryDownloadScheduler,
    RangeKind,
)
from arkvory_sched._middleware import PROGRESS_EVERY_BYTES
from benchmarks._machine import cpu_count, cpu_model, load_average, median

from ._http_apps import (
    CHUNK_SIZE,
    LARGE_PATH,
    LARGE_SIZE,
    SMALL_PATH,
    SMALL_SIZE,
    TIMING_PATH,
    ASGIApp,
    Message,
    Scope,
    bare_app,
    benchmark_settings,
    default_http,
    expected_bytes,
    resolve,
    wrapped_app,
)

__all__ = ["main"]

MIB: Final = 1024 * 1024
HOST: Final = "127.0.0.1"
PROJECT_ROOT: Final = Path(__file__).resolve().parent.parent
RESULTS_PATH: Final = Path(__file__).resolve().parent / "RESULTS.md"
SECTION_HEADING: Final = "## HTTP middleware"

ROUNDS: Final = 7
DURATION_S: Final = 10
WARMUP_S: Final = 2
QUICK_ROUNDS: Final = 2
QUICK_DURATION_S: Final = 3
WRK_THREADS: Final = 1
READY_TIMEOUT_S: Final = 20.0

RANGE_HEADER: Final = f"bytes=0-{8 * MIB - 1}"
DOWNLOAD_ID: Final = "http-bench-session-1"

IN_PROCESS_REPEATS: Final = 7
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
    status: int
    target_loss: float  # the largest throughput loss the issue accepts (fraction)
    in_process_requests: int

    def wrk_args(self, wrk: str, url: str, duration: int, script: Path) -> list[str]:
        args = [wrk, f"-t{WRK_THREADS}", f"-c{self.connections}", f"-d{duration}s", "--latency"]
        for name, value in self.headers:
            args += ["-H", f"{name}: {value}"]
        return [*args, "-s", str(script), url]

    def scope(self) -> Scope:
        """A scope as uvicorn builds it for wrk's request."""
        headers = [(b"host", b"127.0.0.1:8000")]
        headers += [(name.lower().encode(), value.encode()) for name, value in self.headers]
        return {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.4"},
            "http_version": "1.1",
            "server": (HOST, 8000),
            "client": (HOST, 50_000),
            "scheme": "http",
            "method": "GET",
            "root_path": "",
            "path": self.path,
            "raw_path": self.path.encode(),
            "query_string": b"",
            "headers": headers,
            "state": {},
        }


WORKLOADS: Final = (
    Workload(
        key="small",
        title="1 KiB objects, per-request admission",
        path=SMALL_PATH,
        connections=16,
        headers=(),
        body_size=SMALL_SIZE,
        status=200,
        target_loss=0.05,
        in_process_requests=20_000,
    ),
    Workload(
        key="session",
        title="8 MiB ranges of one active session",
        path=LARGE_PATH,
        connections=8,
        headers=(("Range", RANGE_HEADER), ("Arkvory-Download-Id", DOWNLOAD_ID)),
        body_size=8 * MIB,
        status=206,
        target_loss=0.02,
        in_process_requests=300,
    ),
)
WORKLOAD_KEYS: Final = tuple(w.key for w in WORKLOADS)


# ====================================================================== servers
def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time of a running process (Linux ``/proc``); NaN elsewhere."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except OSError:
        return math.nan
    fields = text.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds() -> float:
    """CPU time of finished child processes (wrk runs are the only ones reaped)."""
    usage = os.times()
    return usage.children_user + usage.children_system


class Server:
    """One uvicorn process serving ``bare`` or ``wrapped`` on a free port."""

    def __init__(self, app: str, http_impl: str, log_dir: Path) -> None:
        self.app = app
        self.port = free_port()
        self.log_path = log_dir / f"{app}.log"
        self.command = [
            sys.executable,
            "-m",
            "benchmarks._http_apps",
            app,
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
            env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)},
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

    def cpu_seconds(self) -> float:
        return process_cpu_seconds(self.process.pid)

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


def check_server(server: Server, wrapped: bool) -> None:
    """Each workload's request answers as the benchmark assumes, on both servers."""
    for workload in WORKLOADS:
        status, headers, body = fetch(server.port, workload.path, workload.headers)
        problems = []
        if status != workload.status:
            problems.append(f"status {status}, expected {workload.status}")
        if body != expected_bytes(0, workload.body_size):
            problems.append(f"body of {len(body):,} bytes is not the object's first bytes")
        if workload.status == 206:
            expected_range = f"bytes 0-{workload.body_size - 1}/{LARGE_SIZE}"
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
    wrk_cpu_s: float

    @property
    def rps(self) -> float:
        return self.requests / self.seconds

    @property
    def bytes_per_s(self) -> float:
        return self.bytes / self.seconds

    @property
    def server_cpu_us_per_request(self) -> float:
        return self.server_cpu_s / self.requests * 1e6 if self.requests else math.nan


def run_wrk(command: Sequence[str], server: Server) -> WrkRun:
    cpu_before = server.cpu_seconds()
    children_before = children_cpu_seconds()
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    server_cpu = server.cpu_seconds() - cpu_before
    wrk_cpu = children_cpu_seconds() - children_before
    line = next((ln for ln in completed.stdout.splitlines() if ln.startswith("WRKJSON ")), None)
    if completed.returncode != 0 or line is None:
        raise RuntimeError(
            f"wrk failed ({completed.returncode}): {shlex.join(command)}\n"
            f"{completed.stdout}\n{completed.stderr}"
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
        wrk_cpu_s=wrk_cpu,
    )


@dataclass(slots=True)
class HttpResult:
    workload: Workload
    command: str
    bare: list[WrkRun] = field(default_factory=list)
    wrapped: list[WrkRun] = field(default_factory=list)

    def ratios(self) -> list[float]:
        return [w.rps / b.rps for b, w in zip(self.bare, self.wrapped, strict=True)]

    @property
    def kept(self) -> float:
        """Median wrapped throughput over median bare throughput."""
        return median([r.rps for r in self.wrapped]) / median([r.rps for r in self.bare])

    @property
    def loss(self) -> float:
        return 1.0 - self.kept


def run_http(
    wrk: str,
    servers: dict[str, Server],
    workloads: Sequence[Workload],
    rounds: int,
    duration: int,
    script: Path,
) -> list[HttpResult]:
    results = []
    for workload in workloads:
        placeholder = f"http://{HOST}:PORT{workload.path}"
        command = shlex.join(workload.wrk_args("wrk", placeholder, duration, Path("report.lua")))
        result = HttpResult(workload, command)
        for name in ("bare", "wrapped"):
            server = servers[name]
            run_wrk(workload.wrk_args(wrk, server.url(workload.path), WARMUP_S, script), server)
        for round_ in range(1, rounds + 1):
            for name in ("bare", "wrapped"):
                server = servers[name]
                args = workload.wrk_args(wrk, server.url(workload.path), duration, script)
                run = run_wrk(args, server)
                (result.bare if name == "bare" else result.wrapped).append(run)
                _progress(
                    f"[{workload.key}] round {round_}/{rounds} {name:7}: {run.rps:9,.0f} req/s "
                    f"{run.bytes_per_s / MIB:9,.1f} MiB/s  p50 {_lat(run.p50_us)}  "
                    f"p99 {_lat(run.p99_us)}  server CPU {run.server_cpu_us_per_request:,.1f} "
                    f"µs/req  errors {run.errors + run.status_errors}"
                )
        _progress(f"[{workload.key}] kept {result.kept:.1%} of bare throughput")
        results.append(result)
    return results


@dataclass(frozen=True, slots=True)
class ServerSplit:
    """Where one server's time per request went, from the timing shim (separate run)."""

    workload: Workload
    app: str
    rps: float
    requests: int
    app_us: float  # wall time inside the ASGI app call
    send_us: float  # of which inside uvicorn's send (h11, socket writes, drain waits)

    @property
    def own_us(self) -> float:
        """The app's own time, plus the middleware's when wrapped."""
        return self.app_us - self.send_us


def fetch_timing(server: Server) -> dict[str, float]:
    status, _, body = fetch(server.port, TIMING_PATH, ())
    if status != 200:
        raise RuntimeError(f"{server.app}: {TIMING_PATH} answered {status}")
    data: dict[str, float] = json.loads(body)
    return data


def run_split(
    wrk: str,
    servers: dict[str, Server],
    workloads: Sequence[Workload],
    duration: int,
    script: Path,
) -> list[ServerSplit]:
    splits = []
    for workload in workloads:
        for name in ("bare", "wrapped"):
            server = servers[name]
            run_wrk(workload.wrk_args(wrk, server.url(workload.path), WARMUP_S, script), server)
            fetch_timing(server)  # reset
            args = workload.wrk_args(wrk, server.url(workload.path), duration, script)
            run = run_wrk(args, server)
            timing = fetch_timing(server)
            count = max(1.0, timing["requests"])
            split = ServerSplit(
                workload,
                name,
                run.rps,
                int(timing["requests"]),
                timing["app_s"] / count * 1e6,
                timing["send_s"] / count * 1e6,
            )
            _progress(
                f"[{workload.key}] timed {name:7}: {run.rps:9,.0f} req/s, in app call "
                f"{split.app_us:,.1f} µs, in send {split.send_us:,.1f} µs, own "
                f"{split.own_us:,.1f} µs"
            )
            splits.append(split)
    return splits


# ====================================================================== in-process
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
    workload: Workload
    bare_us: float
    wrapped_us: float
    scheduler_us: float  # admit + report on the scheduler alone
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


def _request_for(workload: Workload) -> DownloadRequest:
    """The request the middleware builds for the workload (same target, range and id)."""
    target = _resolved(workload)
    byte_range = None
    download_id = None
    if workload.headers:
        byte_range = ByteRange(0, workload.body_size, RangeKind.BOUNDED)
        download_id = DOWNLOAD_ID
    return DownloadRequest(
        principal=target.principal,
        principal_kind=target.principal_kind,
        object_id=target.object_id,
        object_size=target.size,
        byte_range=byte_range,
        download_id=download_id,
        client_address=HOST,
    )


def _resolved(workload: Workload) -> DownloadTarget:
    target = asyncio.run(resolve(workload.scope()))
    if target is None:
        raise RuntimeError(f"the resolver does not know {workload.path}")
    return target


async def _scheduler_round_trips(
    scheduler: InMemoryDownloadScheduler, request: DownloadRequest, count: int
) -> None:
    for _ in range(count):
        decision = await scheduler.admit(request)
        if not isinstance(decision, Admitted):
            raise RuntimeError(f"the scheduler did not admit the request: {decision!r}")
        await scheduler.report(decision.grant, Delivered(decision.grant.byte_range))


def measure_in_process(workloads: Sequence[Workload]) -> list[InProcessResult]:
    results = []
    for workload in workloads:
        count = workload.in_process_requests
        scope = workload.scope()
        bare, wrapped = bare_app(), wrapped_app()
        scheduler = InMemoryDownloadScheduler(benchmark_settings())
        request = _request_for(workload)
        loop = asyncio.new_event_loop()
        try:
            for app in (bare, wrapped):  # warm up; the wrapped app's session becomes active
                loop.run_until_complete(_call_many(app, scope, max(10, count // 20)))
            loop.run_until_complete(_scheduler_round_trips(scheduler, request, 100))
            works: dict[str, Callable[[], Coroutine[Any, Any, None]]] = {
                "bare": partial(_call_many, bare, scope, count),
                "wrapped": partial(_call_many, wrapped, scope, count),
                "scheduler": partial(_scheduler_round_trips, scheduler, request, count),
                "bare_task": partial(_call_many_in_tasks, bare, scope, count),
                "wrapped_task": partial(_call_many_in_tasks, wrapped, scope, count),
            }
            times: dict[str, list[float]] = {name: [] for name in works}
            for _ in range(IN_PROCESS_REPEATS):
                for name, work in works.items():
                    times[name].append(_timed(loop, work()))
        finally:
            loop.close()
        us = {name: median(values) / count * 1e6 for name, values in times.items()}
        result = InProcessResult(
            workload,
            bare_us=us["bare"],
            wrapped_us=us["wrapped"],
            scheduler_us=us["scheduler"],
            bare_task_us=us["bare_task"],
            wrapped_task_us=us["wrapped_task"],
        )
        _progress(
            f"[{workload.key}] in-process: bare {result.bare_us:.2f} µs, wrapped "
            f"{result.wrapped_us:.2f} µs, scheduler admit+report {result.scheduler_us:.2f} µs; "
            f"a task per call: bare {result.bare_task_us:.2f} µs, wrapped "
            f"{result.wrapped_task_us:.2f} µs"
        )
        results.append(result)
    return results


@dataclass(frozen=True, slots=True)
class PrimitiveCost:
    name: str
    us: float


def h11_extra_header_us() -> float:
    """What h11 spends on the wrapped response's one extra header (1 KiB response).

    A whole request/response exchange on an ``h11.Connection``, with the headers the
    bare app and uvicorn send, with and without ``arkvory-download-class``; NaN without h11.
    """
    try:
        import h11  # noqa: PLC0415  (only with uvicorn's h11 implementation)
    except ImportError:
        return math.nan
    base = [
        (b"date", b"Mon, 30 Nov 2026 04:38:48 GMT"),
        (b"server", b"uvicorn"),
        (b"etag", b'"small.bin-1024"'),
        (b"accept-ranges", b"bytes"),
        (b"content-type", b"application/octet-stream"),
        (b"content-length", b"1024"),
    ]
    wrapped = [*base, (b"arkvory-download-class", b"release")]
    body = expected_bytes(0, SMALL_SIZE)
    request = b"GET /objects/small.bin HTTP/1.1\r\nHost: 127.0.0.1:8000\r\n\r\n"
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
    for _ in range(IN_PROCESS_REPEATS):
        without.append(exchange(base))
        with_extra.append(exchange(wrapped))
    return (median(with_extra) - median(without)) / count * 1e6


def measure_primitives() -> list[PrimitiveCost]:
    """What a few primitives on the wrapped path cost, unprofiled."""
    count = 50_000

    async def shielded() -> None:
        for _ in range(count):
            with anyio.CancelScope(shield=True):
                pass

    async def fresh_event() -> None:
        for _ in range(count):
            anyio.Event().set()

    costs = []
    loop = asyncio.new_event_loop()
    try:
        for name, work in (
            ("`with anyio.CancelScope(shield=True): pass`", shielded),
            ("`anyio.Event()` + `.set()`", fresh_event),
        ):
            loop.run_until_complete(work())
            runs = [_timed(loop, work()) for _ in range(IN_PROCESS_REPEATS)]
            costs.append(PrimitiveCost(name, median(runs) / count * 1e6))
    finally:
        loop.close()
    extra = h11_extra_header_us()
    if not math.isnan(extra):
        costs.append(PrimitiveCost("h11: one more response header (the wrapped response's)", extra))
    return costs


@dataclass(frozen=True, slots=True)
class ProfileEntry:
    where: str
    calls_per_request: float
    own_us: float  # tottime per request, under the profiler
    share: float  # of the profiled total


@dataclass(slots=True)
class ProfileResult:
    workload: Workload
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


def profile_wrapped(workload: Workload) -> ProfileResult:
    count = workload.in_process_requests
    scope = workload.scope()
    app = wrapped_app()
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
    return ProfileResult(workload, total / count * 1e6, functions, group_entries)


# ====================================================================== report


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _lat(us: float) -> str:
    return f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.0f} µs"


def _signed_lat(us: float) -> str:
    sign = "+" if us >= 0 else "−"
    return sign + _lat(abs(us))


def _verdict(ok: bool) -> str:
    return "**pass**" if ok else "**FAIL**"


def _package_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def wrk_version(wrk: str) -> str:
    completed = subprocess.run([wrk, "--version"], capture_output=True, text=True, check=False)
    first = (completed.stdout or completed.stderr).strip().splitlines()
    return first[0].split("Copyright")[0].strip() if first else "unknown"


@dataclass(slots=True)
class Run:
    argv: list[str]
    http_impl: str
    rounds: int
    duration: int
    wrk: str | None
    http: list[HttpResult]
    splits: list[ServerSplit]
    in_process: list[InProcessResult]
    primitives: list[PrimitiveCost]
    profiles: list[ProfileResult]
    seconds: float
    loads: tuple[str, str]
    server_logs: dict[str, Counter[str]]


def _straddles(result: HttpResult) -> bool:
    """Whether the target lies within the spread of the per-round losses."""
    ratios = result.ratios()
    return 1 - max(ratios) <= result.workload.target_loss <= 1 - min(ratios)


def _target_rows(run: Run) -> list[str]:
    rows = ["| Target | Measured | Result |", "| --- | --- | --- |"]
    for result in run.http:
        w = result.workload
        rows.append(
            f"| {w.title}: throughput loss ≤ {w.target_loss:.0%} "
            f"| {result.loss:.1%} loss (kept {result.kept:.1%}; per-round ratios "
            f"{min(result.ratios()):.1%}–{max(result.ratios()):.1%}) "
            f"| {_verdict(result.loss <= w.target_loss)}"
            + (" (within the run's noise)" if _straddles(result) else "")
            + " |"
        )
    return rows


def _http_sections(run: Run) -> list[str]:
    lines = [
        "### Throughput and latency (medians over the rounds)",
        "",
        "| workload | server | req/s | MiB/s | p50 | p90 | p99 | server CPU per request "
        "| server CPU use | wrk CPU use | errors |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for result in run.http:
        for name, runs in (("bare", result.bare), ("wrapped", result.wrapped)):
            lines.append(
                f"| {result.workload.title} | {name} | {median([r.rps for r in runs]):,.0f} "
                f"| {median([r.bytes_per_s for r in runs]) / MIB:,.1f} "
                f"| {_lat(median([r.p50_us for r in runs]))} "
                f"| {_lat(median([r.p90_us for r in runs]))} "
                f"| {_lat(median([r.p99_us for r in runs]))} "
                f"| {median([r.server_cpu_us_per_request for r in runs]):,.1f} µs "
                f"| {median([r.server_cpu_s / r.seconds for r in runs]):.0%} "
                f"| {median([r.wrk_cpu_s / r.seconds for r in runs]):.0%} "
                f"| {sum(r.errors + r.status_errors for r in runs)} |"
            )
    lines += [
        "",
        "### What the middleware adds",
        "",
        "| workload | throughput kept (median wrapped / median bare) | median per-round ratio "
        "| added p50 | added p90 | added p99 | added server CPU per request |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for result in run.http:

        def added(pick: Callable[[WrkRun], float], result: HttpResult = result) -> float:
            return median([pick(r) for r in result.wrapped]) - median(
                [pick(r) for r in result.bare]
            )

        lines.append(
            f"| {result.workload.title} | {result.kept:.1%} | {median(result.ratios()):.1%} "
            f"| {_signed_lat(added(lambda r: r.p50_us))} "
            f"| {_signed_lat(added(lambda r: r.p90_us))} "
            f"| {_signed_lat(added(lambda r: r.p99_us))} "
            f"| {added(lambda r: r.server_cpu_us_per_request):+,.1f} µs |"
        )
    in_process = {r.workload.key: r for r in run.in_process}
    for result in run.http:
        load = result.workload
        ip = in_process.get(load.key)
        closed_loop = (
            f"{_lat(load.connections / median([r.rps for r in result.bare]) * 1e6)} bare, "
            f"{_lat(load.connections / median([r.rps for r in result.wrapped]) * 1e6)} wrapped"
        )
        saturated = median([r.server_cpu_s / r.seconds for r in result.bare]) >= SATURATED
        lines += [
            "",
            f"{load.title}: wrk keeps {load.connections} requests in flight against a "
            + ("saturated server" if saturated else "server that is not saturated here")
            + f", so latency ≈ {load.connections} ÷ throughput ({closed_loop}); the added "
            "latency mostly mirrors the lower throughput, not a delay of each request"
            + ("" if ip is None else f" (in process the middleware adds {ip.overhead_us:.1f} µs)")
            + ".",
        ]
    lines += [
        "",
        "### Rounds (alternating, in run order)",
        "",
        "| workload | round | bare req/s | wrapped req/s | ratio | bare p50 / p99 "
        "| wrapped p50 / p99 |",
        "| --- | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for result in run.http:
        for index, (b, w) in enumerate(zip(result.bare, result.wrapped, strict=True), 1):
            lines.append(
                f"| {result.workload.key} | {index} | {b.rps:,.0f} | {w.rps:,.0f} "
                f"| {w.rps / b.rps:.1%} | {_lat(b.p50_us)} / {_lat(b.p99_us)} "
                f"| {_lat(w.p50_us)} / {_lat(w.p99_us)} |"
            )
    return lines


def _in_process_sections(run: Run) -> list[str]:
    lines = [
        "### In-process cost per request (no network)",
        "",
        "Each app is called directly with a fake `receive` and a `send` that drops the "
        f"message, in one asyncio loop; median of {IN_PROCESS_REPEATS} alternating batches. "
        "*Scheduler* is `await admit(request)` + `await report(grant, Delivered(...))` on an "
        "`InMemoryDownloadScheduler` alone, with the request the middleware builds; the rest "
        "of the overhead is the middleware itself. uvicorn runs each request in a new task; "
        "the *new task per call* column does the same (anyio keeps state per task, so the "
        "first cancel scope in a task costs more).",
        "",
        "| workload | requests per batch | bare app | wrapped app | overhead "
        "| of which scheduler admit + report | middleware rest "
        "| overhead with a new task per call | overhead / bare server CPU per request (HTTP) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    cpu_of = {
        r.workload.key: median([x.server_cpu_us_per_request for x in r.bare]) for r in run.http
    }
    for r in run.in_process:
        bare_cpu = cpu_of.get(r.workload.key)
        share = "–" if bare_cpu is None else f"{r.overhead_us / bare_cpu:.1%} of {bare_cpu:,.1f} µs"
        lines.append(
            f"| {r.workload.title} | {r.workload.in_process_requests:,} | {r.bare_us:.2f} µs "
            f"| {r.wrapped_us:.2f} µs | {r.overhead_us:.2f} µs | {r.scheduler_us:.2f} µs "
            f"| {r.overhead_us - r.scheduler_us:.2f} µs "
            f"| {r.task_overhead_us:.2f} µs ({r.bare_task_us:.2f} → {r.wrapped_task_us:.2f}) "
            f"| {share} |"
        )
    lines += ["", "Primitives on the wrapped path, timed alone (µs per call):", ""]
    lines += [f"- {p.name}: {p.us:.2f} µs" for p in run.primitives]
    for profile in run.profiles:
        w = profile.workload
        lines += [
            "",
            f"### Profile: wrapped app, {w.title}",
            "",
            f"`cProfile` over {w.in_process_requests:,} in-process requests: "
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


def _split_section(run: Run) -> list[str]:
    lines = [
        "### Inside the running server (one more timed round)",
        "",
        "A second pair of servers runs the same apps under a shim that sums, per object "
        "request, the wall time inside the ASGI app call and the part of it inside "
        "uvicorn's `send` (h11's serialisation and the socket writes). The rest is the app's "
        "own time, plus the middleware's when wrapped; the shim costs both sides alike. One "
        f"wrk run of {run.duration} s per server and workload, same commands. For 8 MiB "
        "ranges `send` also holds the waits for the socket to drain, while other requests "
        "run, so only the own time is meaningful there.",
        "",
        "| workload | server | req/s | in app call | in uvicorn's send | own (app + middleware) |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for split in run.splits:
        lines.append(
            f"| {split.workload.title} | {split.app} | {split.rps:,.0f} "
            f"| {split.app_us:,.1f} µs | {split.send_us:,.1f} µs | {split.own_us:,.1f} µs |"
        )
    return lines


def _split_of(run: Run, workload: Workload) -> tuple[ServerSplit, ServerSplit] | None:
    found = {s.app: s for s in run.splits if s.workload.key == workload.key}
    if "bare" in found and "wrapped" in found:
        return found["bare"], found["wrapped"]
    return None


def _matching(profile: ProfileResult | None, file: str, name: str) -> list[ProfileEntry]:
    """Profile entries of function ``name`` in a file ending in ``file`` (any line)."""
    if profile is None:
        return []
    return [
        f
        for f in profile.functions
        if f.where.split(":", 1)[0] == file and f.where.rsplit(" ", 1)[-1] == name
    ]


def _profile_us(profile: ProfileResult | None, file: str, name: str) -> float:
    """Own µs per request (profiled) of a function, NaN when it is not in the profile."""
    found = _matching(profile, file, name)
    return sum(f.own_us for f in found) if found else math.nan


def _profile_calls(profile: ProfileResult | None, file: str, name: str) -> float:
    found = _matching(profile, file, name)
    return sum(f.calls_per_request for f in found) if found else math.nan


def _group_us(profile: ProfileResult | None, group: str) -> float:
    if profile is None:
        return math.nan
    return next((g.own_us for g in profile.groups if g.where == group), math.nan)


def _n(value: float, unit: str = " µs") -> str:
    return "–" if math.isnan(value) else f"{value:,.1f}{unit}"


def _analysis_section(run: Run) -> list[str]:
    lines = ["### Where the time goes", ""]
    in_process = {r.workload.key: r for r in run.in_process}
    profiles = {p.workload.key: p for p in run.profiles}
    shield = next((p.us for p in run.primitives if "CancelScope" in p.name), math.nan)
    event = next((p.us for p in run.primitives if "Event" in p.name), math.nan)
    for result in run.http:
        w = result.workload
        share = w.target_loss / (1 - w.target_loss)
        bare_cpu = median([r.server_cpu_us_per_request for r in result.bare])
        wrapped_cpu = median([r.server_cpu_us_per_request for r in result.wrapped])
        added = wrapped_cpu - bare_cpu
        ip = in_process.get(w.key)
        use = median([r.server_cpu_s / r.seconds for r in result.bare])
        limit = (
            "so its CPU time per request sets the throughput"
            if use >= SATURATED
            else "so part of the time it waits, for wrk or for a CPU the machine's other "
            "processes hold"
        )
        text = (
            f"**{w.title}.** The bare server spends {bare_cpu:,.1f} µs of CPU per request "
            f"(uvicorn, h11, asyncio and the kernel; it runs at {use:.0%} of a CPU, {limit}), "
            f"the wrapped one {wrapped_cpu:,.1f} µs ({added:+,.1f} µs). A loss of at most "
            f"{w.target_loss:.0%} leaves room for {bare_cpu * share:,.1f} µs."
        )
        if ip is not None:
            text += (
                f" In process the middleware adds {ip.overhead_us:.1f} µs: "
                f"{ip.scheduler_us:.1f} µs in the scheduler's admit + report and "
                f"{ip.overhead_us - ip.scheduler_us:.1f} µs in the middleware itself."
            )
        pair = _split_of(run, w)
        own = math.nan
        if pair is not None and ip is not None:
            bare, wrapped = pair
            own = wrapped.own_us - bare.own_us
            text += (
                f" Inside the running server the same code takes {own:,.1f} µs "
                f"({own / ip.overhead_us:.1f}× the in-process figure: there it runs "
                "between h11 and asyncio with colder caches, in a new task per request)"
            )
            if w.key == "small":
                header = next((p.us for p in run.primitives if p.name.startswith("h11")), None)
                text += (
                    f", and uvicorn's send path takes {wrapped.send_us - bare.send_us:,.1f} µs "
                    "more (it sends one more header, `arkvory-download-class`"
                    + ("" if header is None else f", {header:.1f} µs of it in h11 alone")
                    + "; the rest is the same code running slower next to the middleware's)"
                )
            text += "."
        if added > 0:
            text += (
                f" With this overhead the loss stays within {w.target_loss:.0%} only for a "
                f"host that spends at least {added / share:,.0f} µs of server CPU per request."
            )
        ratios = result.ratios()
        if _straddles(result):
            text += (
                f" The per-round ratios ({min(ratios):.1%}–{max(ratios):.1%}) straddle the "
                "target, so on this shared machine the verdict is within the run's noise; the "
                f"added server CPU per request ({added:+,.1f} µs, {added / bare_cpu:+.1%} of "
                "the bare server's) is a second reading."
            )
        lines += [text, ""]
        profile = profiles.get(w.key)
        if profile is not None:
            top = [g for g in profile.groups if g.where != "benchmark app and driver"][:5]
            lines += [
                "Top costs of the wrapped path (profile above, own time): "
                + "; ".join(f"{g.where} {g.share:.0%}" for g in top)
                + ".",
                "",
            ]
        over_budget = own > bare_cpu * share
        if result.loss > w.target_loss or over_budget:
            multiplier = added / ip.overhead_us if ip is not None and added > 0 else math.nan
            why = (
                "target missed"
                if result.loss > w.target_loss
                else f"the middleware's own time in the server, {own:,.1f} µs, exceeds the "
                f"{bare_cpu * share:,.1f} µs the target allows"
            )
            lines += _fixes(w, ip, profile, (shield, event), (bare_cpu * share, multiplier), why)
    return lines


def _fixes(
    workload: Workload,
    ip: InProcessResult | None,
    profile: ProfileResult | None,
    primitives: tuple[float, float],
    budget: tuple[float, float],
    why: str,
) -> list[str]:
    """Suggested fixes for a missed target, each with what it costs now.

    ``primitives``: the shielded cancel scope and the fresh event, µs each; ``budget``: the
    server CPU per request the target allows and how many µs of server CPU one µs of
    in-process overhead turned into.
    """
    shield, event = primitives
    allowed_us, multiplier = budget
    rate_us = _n(_group_us(profile, "arkvory_sched/_rate.py"))
    key_us = _n(_profile_us(profile, "_session.py", "session_key"))
    build_us = _n(_profile_us(profile, "_middleware.py", "_download_request"))
    wholes = _n(_profile_calls(profile, "_model.py", "whole"), "×")
    progress_calls = _n(_profile_calls(profile, "_memory.py", "progress"), "×")
    lines = [f"Suggested fixes ({workload.key}: {why}; µs under the profiler marked *):"]
    if workload.key == "small":
        lines += [
            "- `_serve` reports in a `finally` under `anyio.CancelScope(shield=True)` "
            f"({_n(shield)} alone, plus anyio's per-task state on first use in each new "
            "request task). `InMemoryDownloadScheduler.report` never suspends, so it cannot "
            "be cancelled: shield only for ports whose `report` may suspend (a flag on the "
            "port, or a synchronous report for the in-memory scheduler).",
            "- `InMemoryDownloadScheduler.report` calls `_notify()`, which replaces an "
            f"`anyio.Event` on every report ({_n(event)} alone) even when nothing waits in "
            "`wait_for_change`: count the waiters and notify only when there are any.",
            f"- `SchedulerCore.admit` hashes a `session_key` (blake2b, {key_us}*) for every "
            "per-request object only to test `key not in self._active`: skip it while no "
            "session of that object (or none at all) is active.",
            f"- `report` feeds the rate estimator per request (`_rate.py` {rate_us}*): "
            "accumulate bytes and record once per tick.",
            "- The middleware's glue: `_download_request` builds a 10-field frozen "
            f"`DownloadRequest` ({build_us}* plus the dataclass `__init__`), "
            f"`effective_range` builds `ByteRange.whole()` {wholes} per request, and the "
            "response start copies the message and its header list. A per-request fast path "
            "that passes the target's fields straight to the core would drop most of it.",
            "",
        ]
        if ip is not None and not math.isnan(multiplier):
            lines += [
                f"In the running server each µs of in-process overhead cost {multiplier:.1f} µs "
                "of server CPU. Scaling alike, meeting the target against this minimal app "
                f"needs the in-process overhead at or below {allowed_us / multiplier:.1f} µs "
                f"(now {ip.overhead_us:.1f} µs). Against a host that does real work per "
                "request (routing, authorisation, a metadata lookup, a file open) the same "
                "overhead is a proportionally smaller share.",
                "",
            ]
    else:
        chunks = workload.body_size // CHUNK_SIZE
        per_message = [
            f
            for f in (profile.functions if profile is not None else [])
            if f.where.startswith("_middleware.py:") and f.calls_per_request >= chunks
        ]
        layers = " → ".join(f"`{f.where.rsplit(' ', 1)[-1]}`" for f in per_message) or "–"
        layers_us = _n(sum(f.own_us for f in per_message) if per_message else math.nan)
        rest = ip.overhead_us - ip.scheduler_us if ip is not None else math.nan
        lines += [
            f"- Each of the {chunks} body messages of a range passes through the response "
            f"observer's coroutines ({layers}, {len(per_message)} extra await layer(s) "
            f"before uvicorn's `send`, {layers_us}* per range): about {rest / chunks:.2f} µs "
            f"per message in process ({_n(rest)} per range besides admit + report). One "
            "layer with a lean body path (test `http.response.body` first, read `body` and "
            "`more_body` once), or bigger chunks from the host (256 KiB instead of "
            f"{CHUNK_SIZE // 1024} KiB: 4× fewer messages), cuts this directly.",
            f"- Progress goes to the scheduler every {PROGRESS_EVERY_BYTES / MIB:g} MiB: "
            f"{progress_calls} `await progress()` per range, each feeding the rate estimator "
            f"(`_rate.py` {rate_us}*). Reporting every 4–8 MiB, or at most once per tick, "
            "keeps the rate estimate and the idle detection with a fraction of the calls.",
            "",
        ]
    return lines


def render(run: Run) -> str:
    now = datetime.datetime.now(datetime.UTC)
    command = shlex.join(["python", "-m", "benchmarks.http_bench", *run.argv])
    cfg = benchmark_settings()
    lines = [
        SECTION_HEADING,
        "",
        f"- Command: `{command}` (from the project root, in `.venv`); whole run "
        f"{run.seconds:.0f} s",
        f"- Machine: {cpu_count()} CPUs (`nproc`), {cpu_model()}, "
        f"{platform.system()} {platform.release()}; wrk and uvicorn share them",
        f"- Python: {platform.python_implementation()} {platform.python_version()}, "
        f"uvicorn {_package_version('uvicorn')} (`--http {run.http_impl}`, "
        f"{run.http_impl} {_package_version(run.http_impl)}, `--loop asyncio`), "
        f"anyio {_package_version('anyio')}; {run.wrk or 'wrk not run'}",
        f"- Date: {now:%Y-%m-%d %H:%M} UTC; load average (1 / 5 / 15 min) "
        f"{run.loads[0]} before, {run.loads[1]} after",
        "- App: raw ASGI, objects from memory, bodies in "
        f"{CHUNK_SIZE // 1024} KiB chunks; wrapped: `DownloadSchedulerMiddleware` over "
        f"`InMemoryDownloadScheduler(SchedulerSettings(max_downloads={cfg.max_downloads}, "
        f"transfer_queue_limit={cfg.transfer_queue_limit}, "
        f"transfer_queue_per_principal={cfg.transfer_queue_per_principal}, "
        f"sessions={cfg.sessions}, ranges_per_session={cfg.ranges_per_session}), "
        "ticket_keys=[generate_key()])`, tick loop in the lifespan",
    ]
    if run.http:
        lines.append(
            "- Servers: `uvicorn --factory benchmarks._http_apps:{bare_app,wrapped_app} "
            f"--host 127.0.0.1 --workers 1 --loop asyncio --http {run.http_impl} --lifespan on "
            "--no-access-log` (started through `uvicorn.run` by `python -m "
            "benchmarks._http_apps`), both running for the whole run, each idle while the "
            "other is loaded"
        )
        lines.append(
            f"- Rounds: {run.rounds} per workload, each bare then wrapped, {run.duration} s per "
            f"side after a {WARMUP_S} s warm-up of each; wrk commands (PORT is the server's):"
        )
        lines += [f"  - `{r.command}`" for r in run.http]
        lines += ["", "### Targets", "", *_target_rows(run), "", *_http_sections(run)]
    else:
        lines += ["", "(HTTP part not run: `--no-http`.)"]
    lines += ["", *_in_process_sections(run)]
    if run.splits:
        lines += ["", *_split_section(run)]
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


def write_section(path: Path, section: str) -> None:
    """Replace the "HTTP middleware" section of ``path``, or append it."""
    if not path.exists():
        path.write_text("# Benchmark results\n\n" + section, encoding="utf-8")
        return
    text = path.read_text(encoding="utf-8")
    before, found, rest = text.partition(SECTION_HEADING + "\n")
    if not found:
        path.write_text(text.rstrip("\n") + "\n\n" + section, encoding="utf-8")
        return
    following = rest.find("\n## ")
    after = rest[following + 1 :] if following >= 0 else ""
    path.write_text(before + section + ("\n" + after if after else ""), encoding="utf-8")


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
        "--rounds", type=int, default=None, help=f"bare/wrapped pairs (default {ROUNDS})"
    )
    parser.add_argument(
        "--duration", type=int, default=None, help=f"seconds per wrk run (default {DURATION_S})"
    )
    parser.add_argument(
        "--workloads",
        type=parse_workloads,
        default=WORKLOADS,
        help=f"comma-separated, from {','.join(WORKLOAD_KEYS)} (default both)",
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
        "--no-split",
        action="store_true",
        help="skip the extra timed round that splits each server's time per request",
    )
    parser.add_argument(
        "--http",
        choices=("h11", "httptools"),
        default=None,
        help="uvicorn's HTTP implementation (default httptools when installed, else h11)",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help="markdown file to update (default benchmarks/RESULTS.md, none with --quick)",
    )
    return parser


@contextlib.contextmanager
def running_servers(http_impl: str, *, timed: bool = False) -> Iterator[dict[str, Server]]:
    """Both servers, started side by side and checked; stopped on the way out."""
    suffix = "_timed" if timed else ""
    with tempfile.TemporaryDirectory(prefix="arkvory-http-bench-") as log_dir:
        servers: dict[str, Server] = {}
        try:
            for name in ("bare", "wrapped"):
                servers[name] = Server(name + suffix, http_impl, Path(log_dir))
            for name, server in servers.items():
                server.wait_ready()
                check_server(server, wrapped=name == "wrapped")
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
    load_before = load_average()
    started = time.perf_counter()
    http_results: list[HttpResult] = []
    splits: list[ServerSplit] = []
    server_logs: dict[str, Counter[str]] = {}
    if wrk is not None:
        with (
            tempfile.TemporaryDirectory(prefix="arkvory-wrk-") as scratch,
            running_servers(http_impl) as servers,
        ):
            script = Path(scratch) / "report.lua"
            script.write_text(WRK_SCRIPT, encoding="utf-8")
            _progress(
                f"servers up: bare on :{servers['bare'].port}, wrapped on "
                f":{servers['wrapped'].port} (uvicorn, --http {http_impl}, --loop asyncio)"
            )
            http_results = run_http(wrk, servers, workloads, rounds, duration, script)
            for name, server in servers.items():
                server_logs[name] = Counter(server.log_text().splitlines())
        if not args.no_split:
            with (
                tempfile.TemporaryDirectory(prefix="arkvory-wrk-") as scratch,
                running_servers(http_impl, timed=True) as servers,
            ):
                script = Path(scratch) / "report.lua"
                script.write_text(WRK_SCRIPT, encoding="utf-8")
                _progress("timed servers up (one more round per workload) …")
                splits = run_split(wrk, servers, workloads, duration, script)
    _progress("in-process timing …")
    in_process = measure_in_process(workloads)
    primitives = measure_primitives()
    _progress("profiling …")
    profiles = [profile_wrapped(w) for w in workloads]
    run = Run(
        argv=args_list,
        http_impl=http_impl,
        rounds=rounds,
        duration=duration,
        wrk=wrk_version(wrk) if wrk is not None else None,
        http=http_results,
        splits=splits,
        in_process=in_process,
        primitives=primitives,
        profiles=profiles,
        seconds=time.perf_counter() - started,
        loads=(load_before, load_average()),
        server_logs=server_logs,
    )
    section = render(run)
    print(section)
    if output is not None:
        write_section(output, section)
        _progress(f"written to {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
