"""What ``DownloadSchedulerMiddleware`` costs a real server: the host bare and wrapped.

Run with ``python -m benchmarks.http_bench`` (``make bench-http``); needs ``wrk`` on
``PATH`` (Debian/Ubuntu: ``apt-get install wrk``) unless ``--no-http``.

1. In process, without a network: the in-memory host of ``_http_apps`` is called
   directly with a fake ``receive`` and ``send``, bare and wrapped, in alternating
   batches; the fastest batch of each is the middleware's own cost per request (other
   processes can only ever add time to a batch).
2. Over loopback: uvicorn serving the file server of ``_http_apps``, bare and behind the
   middleware, each loaded by one wrk run per workload after a warm-up; with two CPUs
   the servers run on one and wrk on the other (``taskset``).

One run of each is what a user sees, not a verdict to a tenth of a point: on this shared
machine two runs of the same server differ by several per cent. The middleware's own
work is counted without that noise by ``http_instructions`` (ADR 0014).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import http.client
import json
import os
import platform
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from benchmarks._http_apps import (
    LARGE_OBJECT,
    LARGE_PATH,
    SMALL_OBJECT,
    SMALL_PATH,
    ASGIApp,
    Scope,
    bare_memory_app,
    default_http,
    expected_bytes,
    server_environment,
    wrapped_memory_app,
    write_files,
)
from benchmarks._machine import cpu_count, cpu_model, load_average
from benchmarks._report import RESULTS_PATH, package_version, write_section

__all__ = ["RANGE_HEADER", "WORKLOADS", "Workload", "in_process", "main", "server"]

MIB: Final = 1024 * 1024
HOST: Final = "127.0.0.1"
PROJECT_ROOT: Final = Path(__file__).resolve().parent.parent
SECTION_HEADING: Final = "## HTTP middleware"
DURATION_S: Final = 10
WARMUP_S: Final = 2
READY_TIMEOUT_S: Final = 20.0
BATCHES: Final = 9
RANGE_HEADER: Final = f"bytes=0-{8 * MIB - 1}"
DOWNLOAD_ID: Final = "http-bench-session-1"

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
        headers=(("Range", RANGE_HEADER), ("Arkvory-Download-Id", DOWNLOAD_ID)),
        body_size=8 * MIB,
        status=206,
        target_loss=0.02,
        requests=300,
        by_bytes=True,
    ),
)


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
def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


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


def cpus() -> tuple[list[str], list[str]]:
    """``taskset`` prefixes of the servers (the last CPU) and of wrk (the first), so the
    load generator never competes with the server it measures; none on one CPU."""
    if shutil.which("taskset") is None or cpu_count() < 2:
        return [], []
    allowed = sorted(os.sched_getaffinity(0))
    return ["taskset", "-c", str(allowed[-1])], ["taskset", "-c", str(allowed[0])]


@contextlib.contextmanager
def server(
    app: str, root: Path, logs: Path, prefix: Sequence[str], ready_s: float = READY_TIMEOUT_S
) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """A uvicorn process serving ``app`` on a free port (under ``prefix``: ``taskset`` or
    valgrind), answering before it is used; stopped however the block ends."""
    port = free_port()
    command = [
        *prefix,
        sys.executable,
        "-m",
        "uvicorn",
        "--factory",
        f"benchmarks._http_apps:{app}_app",
    ]
    command += ["--port", str(port), "--loop", "asyncio", "--lifespan", "on", "--no-access-log"]
    command += ["--log-level", "warning"]
    log = (logs / f"{app}-{port}.log").open("wb")
    environment = server_environment(root)
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
    problems = []
    if status != workload.status or body != expected_bytes(0, workload.body_size):
        problems.append(f"status {status} with {len(body):,} bytes")
    if wrapped != ("arkvory-download-class" in headers):
        problems.append("Arkvory-Download-Class " + ("missing" if wrapped else "set"))
    if problems:
        raise RuntimeError(f"{workload.path}: " + "; ".join(problems))


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
    """Per workload, one wrk run against each server, bare first, after a warm-up."""
    root, script = scratch / "files", scratch / "report.lua"
    write_files(root)
    script.write_text(WRK_SCRIPT, encoding="utf-8")
    server_cpu, wrk_cpu = cpus()
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
    argv: Sequence[str], costs: dict[str, tuple[float, float]], runs: dict[str, dict[str, WrkRun]]
) -> str:
    now = datetime.datetime.now(datetime.UTC)
    lines = [
        SECTION_HEADING,
        "",
        f"- Command: `{shlex.join(['python', '-m', 'benchmarks.http_bench', *argv])}`",
        f"- Machine: {cpu_count()} CPUs, {cpu_model()}; CPython {platform.python_version()}, "
        f"uvicorn {package_version('uvicorn')} ({default_http()}), Starlette "
        f"{package_version('starlette')}; servers and wrk on separate CPUs when there are two",
        f"- Date: {now:%Y-%m-%d %H:%M} UTC; load average {load_average()} at the end",
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
    for workload in WORKLOADS:
        pair = runs.get(workload.key)
        if pair is None:
            continue
        bare, wrapped = pair["bare"], pair["wrapped"]
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
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.http_bench",
        description="The middleware's cost: in process, and one wrk run of each server.",
    )
    parser.add_argument(
        "--no-http", action="store_true", help="only the in-process part, printed, not written"
    )
    args_list = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(args_list)
    if not args.no_http and shutil.which("wrk") is None:
        print("wrk is not on PATH: apt-get install wrk, or --no-http", file=sys.stderr)
        return 2
    costs = {w.key: in_process(w) for w in WORKLOADS}
    runs: dict[str, dict[str, WrkRun]] = {}
    if not args.no_http:
        with tempfile.TemporaryDirectory(prefix="arkvory-http-bench-") as scratch:
            runs = over_http(Path(scratch))
    section = render(args_list, costs, runs)
    print(section)
    if not args.no_http:
        write_section(RESULTS_PATH, SECTION_HEADING, section)
    errors = sum(run.errors for pair in runs.values() for run in pair.values())
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
