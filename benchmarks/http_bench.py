"""What ``DownloadSchedulerMiddleware`` costs a real server, bare and wrapped:
``python -m benchmarks.http_bench`` (``make bench-http``; needs ``wrk`` unless
``--no-http``).

In process, the in-memory host of ``_http_apps`` is called with a fake ``receive`` and
``send`` in alternating batches; the fastest batch of each is the middleware's own cost
(other processes can only add time to a batch). Over loopback, uvicorn serves the file
server bare and wrapped, each loaded by one wrk run per workload after a warm-up, servers
and wrk on different CPUs. One run of each is what a user sees, not a verdict to a tenth
of a point: ``http_instructions`` counts the middleware's work without the noise.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import importlib.util
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any, Final

from benchmarks._http_apps import (
    LARGE_OBJECT,
    LARGE_PATH,
    ROOT_VARIABLE,
    SMALL_OBJECT,
    SMALL_PATH,
    ASGIApp,
    Scope,
    bare_memory_app,
    expected_bytes,
    wrapped_memory_app,
    write_files,
)
from benchmarks._machine import cpu_count, load_average
from benchmarks._report import header, write_section

MIB: Final = 1024 * 1024
HOST: Final = "127.0.0.1"
PROJECT_ROOT: Final = Path(__file__).resolve().parent.parent
HEADING: Final = "## HTTP middleware"
DURATION_S: Final = 10
WARMUP_S: Final = 2
BATCHES: Final = 9
RANGE_HEADER: Final = f"bytes=0-{8 * MIB - 1}"

# The wrk Lua hook: one machine-readable line with the totals and percentiles (µs).
WRK_SCRIPT: Final = """\
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"requests":%d,"bytes":%d,"duration_us":%d,"errors":%d,"p50":%.1f,"p99":%.1f}\\n',
    summary.requests, summary.bytes, summary.duration,
    e.connect + e.read + e.write + e.status + e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
"""


@dataclass(frozen=True, slots=True)
class Workload:
    key: str
    title: str
    path: str  # a file, served over HTTP
    memory_path: str  # the same request to the in-memory host, in process
    connections: int  # wrk's
    headers: tuple[tuple[str, str], ...]
    body_size: int
    status: int
    target_loss: float  # the largest throughput loss the issue accepts
    requests: int  # per in-process batch
    # Throughput in bytes rather than completed responses: 8 large responses complete
    # nearly together, so a count of them moves in steps of 3 % of a run.
    by_bytes: bool = False


WORKLOADS: Final = (
    Workload(
        key="small",
        title="1 KiB files, per-request admission",
        path=SMALL_PATH,
        memory_path=SMALL_OBJECT,
        connections=16,
        headers=(),
        body_size=1024,
        status=200,
        target_loss=0.05,
        requests=20_000,
    ),
    Workload(
        key="session",
        title="8 MiB ranges of one active session (64 MiB file)",
        path=LARGE_PATH,
        memory_path=LARGE_OBJECT,
        connections=8,
        headers=(("Range", RANGE_HEADER), ("Arkvory-Download-Id", "http-bench-session-1")),
        body_size=8 * MIB,
        status=206,
        target_loss=0.02,
        requests=300,
        by_bytes=True,
    ),
)


def default_http() -> str:
    """The HTTP implementation uvicorn picks: ``httptools`` when installed, else ``h11``."""
    return "httptools" if importlib.util.find_spec("httptools") is not None else "h11"


# ====================================================================== in process
def scope_for(path: str, headers: Sequence[tuple[str, str]]) -> Scope:
    """A scope as uvicorn builds it for wrk's request."""
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


async def _receive() -> dict[str, Any]:
    return {"type": "http.request", "body": b"", "more_body": False}


async def _discard(message: Any) -> None:
    return None


async def _serve(app: ASGIApp, scope: Scope, count: int) -> float:
    started = time.perf_counter()
    for _ in range(count):
        await app(dict(scope), _receive, _discard)
    return time.perf_counter() - started


def in_process(workload: Workload) -> tuple[float, float]:
    """µs per request, bare and wrapped: the fastest of alternating batches."""
    scope = scope_for(workload.memory_path, workload.headers)
    apps = {"bare": bare_memory_app(), "wrapped": wrapped_memory_app()}
    best = dict.fromkeys(apps, float("inf"))
    loop = asyncio.new_event_loop()
    try:
        for app in apps.values():  # warm up; the wrapped app's session becomes active
            loop.run_until_complete(_serve(app, scope, max(10, workload.requests // 20)))
        for _ in range(BATCHES):
            for name, app in apps.items():
                seconds = loop.run_until_complete(_serve(app, scope, workload.requests))
                best[name] = min(best[name], seconds)
    finally:
        loop.close()
    return best["bare"] / workload.requests * 1e6, best["wrapped"] / workload.requests * 1e6


# ====================================================================== servers
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


@contextlib.contextmanager
def server(
    app: str, root: Path, logs: Path, prefix: Sequence[str], ready_s: float = 20.0
) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """A uvicorn process serving ``app`` on a free port (under ``prefix``: ``taskset`` or
    valgrind), answering before it is used; stopped however the block ends. Its path
    starts with this tree's ``src``, so a run from a second worktree measures its own
    code, not the checkout the editable install names."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
    command = [*prefix, sys.executable, "-m", "uvicorn", "--factory"]
    command += [f"benchmarks._http_apps:{app}_app", "--port", str(port), "--loop", "asyncio"]
    command += ["--lifespan", "on", "--no-access-log", "--log-level", "warning"]
    path = os.pathsep.join((str(PROJECT_ROOT / "src"), str(PROJECT_ROOT)))
    environment = {**os.environ, "PYTHONPATH": path, ROOT_VARIABLE: str(root)}
    log = (logs / f"{app}-{port}.log").open("wb")
    process = subprocess.Popen(
        command, cwd=PROJECT_ROOT, stdout=log, stderr=subprocess.STDOUT, env=environment
    )
    try:
        deadline = time.monotonic() + ready_s
        while True:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the {app} server did not start: see {log.name}")
            with contextlib.suppress(OSError):
                if fetch(port, SMALL_PATH, ())[0] == 200:
                    break
            time.sleep(0.2)
        yield process, port
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)  # valgrind writes its last dump first
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def check(port: int, wrapped: bool, workload: Workload) -> None:
    """The request answers as the benchmark assumes; on the wrapped server the range
    request also makes the download session active, so every range wrk sends is a
    further range of an active session."""
    status, headers, body = fetch(port, workload.path, workload.headers)
    if status != workload.status or body != expected_bytes(0, workload.body_size):
        raise RuntimeError(f"{workload.path}: status {status} with {len(body):,} bytes")
    if wrapped != ("arkvory-download-class" in headers):
        raise RuntimeError(
            f"{workload.path}: Arkvory-Download-Class {'missing' if wrapped else 'set'}"
        )


@dataclass(frozen=True, slots=True)
class WrkRun:
    responses: float  # per second (by_bytes: bytes read ÷ one response's body)
    p50_ms: float
    p99_ms: float
    errors: int
    server_cpu_us: float  # per response


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wrk(command: Sequence[str], pid: int, workload: Workload) -> WrkRun:
    """One wrk run, with the server's CPU time over it."""
    before = cpu_seconds(pid)
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    used = cpu_seconds(pid) - before
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("WRKJSON ")), None)
    if done.returncode != 0 or line is None:
        raise RuntimeError(f"wrk failed: {shlex.join(command)}\n{done.stdout}{done.stderr}")
    data = json.loads(line.removeprefix("WRKJSON "))
    responses = int(data["bytes"]) / workload.body_size if workload.by_bytes else data["requests"]
    seconds = int(data["duration_us"]) / 1e6
    return WrkRun(
        responses / seconds,
        float(data["p50"]) / 1000,
        float(data["p99"]) / 1000,
        int(data["errors"]),
        used / max(1.0, responses) * 1e6,
    )


def over_http(scratch: Path) -> dict[str, dict[str, WrkRun]]:
    """Per workload, one wrk run against each server, bare first, after a warm-up. With
    two CPUs the servers run on the last and wrk on the first, so the load generator never
    competes with the server it measures."""
    root, script = scratch / "files", scratch / "report.lua"
    write_files(root)
    script.write_text(WRK_SCRIPT, encoding="utf-8")
    server_cpu: list[str] = []
    wrk_cpu: list[str] = []
    if cpu_count() >= 2:
        allowed = sorted(os.sched_getaffinity(0))
        server_cpu, wrk_cpu = (
            ["taskset", "-c", str(allowed[-1])],
            ["taskset", "-c", str(allowed[0])],
        )
    runs: dict[str, dict[str, WrkRun]] = {}
    for workload in WORKLOADS:
        runs[workload.key] = {}
        for app in ("bare", "wrapped"):
            with server(app, root, scratch, server_cpu) as (process, port):
                check(port, app == "wrapped", workload)
                headers = [a for name, v in workload.headers for a in ("-H", f"{name}: {v}")]
                url = f"http://{HOST}:{port}{workload.path}"
                base = [*wrk_cpu, "wrk", "-t1", f"-c{workload.connections}", "--latency"]
                base += [*headers, "-s", str(script)]
                wrk([*base, f"-d{WARMUP_S}s", url], process.pid, workload)
                run = wrk([*base, f"-d{DURATION_S}s", url], process.pid, workload)
                runs[workload.key][app] = run
                print(f"[{workload.key}] {app}: {run.responses:,.1f}/s", file=sys.stderr)
    return runs


# ====================================================================== report
def render(
    argv: Sequence[str],
    costs: dict[str, tuple[float, float]],
    runs: dict[str, dict[str, WrkRun]],
    load_before: str,
) -> str:
    software = (
        f"uvicorn {version('uvicorn')} ({default_http()}), Starlette {version('starlette')}; "
        "servers and wrk on separate CPUs when there are two"
    )
    lines = [
        HEADING,
        "",
        *header("http_bench", argv, software, load_before),
        "",
        f"In process (in-memory host, fastest of {BATCHES} alternating batches, µs per request):",
        "",
        "| workload | bare | wrapped | the middleware adds |",
        "| --- | ---: | ---: | ---: |",
    ]
    for workload in WORKLOADS:
        alone, behind = costs[workload.key]
        lines.append(f"| {workload.title} | {alone:.2f} | {behind:.2f} | {behind - alone:.2f} µs |")
    if runs:
        lines += [
            "",
            f"Over HTTP (one {DURATION_S} s wrk run of each server after a {WARMUP_S} s warm-up; "
            "one run each, so a few per cent either way is this machine's noise):",
            "",
            "| workload | bare responses/s | wrapped | kept | target | p50 / p99 bare "
            "| p50 / p99 wrapped | server CPU per response, bare / wrapped | errors |",
            "| --- | ---: | ---: | ---: | --- | --- | --- | --- | ---: |",
        ]
    for workload in WORKLOADS if runs else ():
        bare, wrapped = runs[workload.key]["bare"], runs[workload.key]["wrapped"]
        kept = wrapped.responses / bare.responses
        within = "within" if kept >= 1 - workload.target_loss else "**outside**"
        lines.append(
            f"| {workload.title} | {bare.responses:,.1f} | {wrapped.responses:,.1f} "
            f"| {kept:.1%} | loss ≤ {workload.target_loss:.0%}: {within} "
            f"| {bare.p50_ms:.2f} / {bare.p99_ms:.2f} ms | {wrapped.p50_ms:.2f} / "
            f"{wrapped.p99_ms:.2f} ms | {bare.server_cpu_us:,.0f} / "
            f"{wrapped.server_cpu_us:,.0f} µs | {bare.errors + wrapped.errors} |"
        )
    return "\n".join([*lines, ""])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.http_bench")
    parser.add_argument(
        "--no-http", action="store_true", help="only the in-process part, printed, not written"
    )
    argv = list(sys.argv[1:] if argv is None else argv)
    no_http = parser.parse_args(argv).no_http
    if not no_http and shutil.which("wrk") is None:
        print("wrk is not on PATH: apt-get install wrk, or --no-http", file=sys.stderr)
        return 2
    load_before = load_average()
    costs = {w.key: in_process(w) for w in WORKLOADS}
    runs: dict[str, dict[str, WrkRun]] = {}
    if not no_http:
        with tempfile.TemporaryDirectory(prefix="arkvory-http-bench-") as scratch:
            runs = over_http(Path(scratch))
    section = render(argv, costs, runs, load_before)
    print(section)
    if not no_http:
        write_section(section)
    errors = sum(run.errors for pair in runs.values() for run in pair.values())
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
