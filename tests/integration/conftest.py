"""Fixtures of the integration suite: the demo artifact server as a real subprocess.

Nothing is mocked. ``start_server`` runs ``python -m arkvory_sched.demo serve`` on a free
loopback port with the ``ARKVORY_*`` variables a test chooses (and none inherited from
the caller), waits for ``/readyz`` and stops it at teardown (SIGTERM, then SIGKILL).
Files are written into the served directory with deterministic bytes, so every download
is checked against a known SHA-256.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Protocol

import httpx
import pytest

MIB = 1024 * 1024
HOST = "127.0.0.1"
STARTUP_SECONDS = 30.0
STOP_SECONDS = 10.0
POLL_SECONDS = 0.05


# --- small helpers ------------------------------------------------------------------------


def free_port(host: str = HOST) -> int:
    """A TCP port nobody listens on right now (the server binds it with SO_REUSEADDR)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


def wait_ready(
    url: str, deadline: float, *, alive: Callable[[], bool] | None = None
) -> dict[str, Any]:
    """Poll ``url`` (a ``/readyz``) until it answers ``200``; return its JSON document.

    ``deadline`` is a :func:`time.monotonic` value. ``alive`` is asked between polls so a
    server that died at start-up fails at once instead of at the deadline.
    """
    last: str = "no answer yet"
    while True:
        try:
            response = httpx.get(url, timeout=2.0)
        except httpx.TransportError as error:
            last = f"{type(error).__name__}: {error}"
        else:
            if response.status_code == 200:
                document: dict[str, Any] = response.json()
                return document
            last = f"status {response.status_code}"
        if alive is not None and not alive():
            raise RuntimeError(f"{url}: the server exited before it was ready ({last})")
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{url} not ready before the deadline ({last})")
        time.sleep(POLL_SECONDS)


def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``predicate`` until it holds; fail the test naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(POLL_SECONDS)


def require_tool(name: str) -> str:
    """The path of a command-line client; skip without it — but fail under ``CI=true``."""
    path = shutil.which(name)
    if path is not None:
        return path
    reason = f"{name} is not installed"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (CI=true: integration clients are required)")
    pytest.skip(reason)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(MIB):
            digest.update(chunk)
    return digest.hexdigest()


def pattern_chunks(size: int, seed: str, chunk_size: int = MIB) -> Iterator[bytes]:
    """Deterministic, cheap, non-repeating bytes: one pseudo-random block, each copy
    stamped with its index, so no two chunks (and no two files) are alike."""
    block = random.Random(seed).randbytes(chunk_size)
    index = 0
    remaining = size
    while remaining > 0:
        chunk = (index.to_bytes(8, "big") + block[8:])[: min(chunk_size, remaining)]
        yield chunk
        remaining -= len(chunk)
        index += 1


def pattern_bytes(size: int, seed: str) -> bytes:
    return b"".join(pattern_chunks(size, seed))


def write_pattern_file(path: Path, size: int, seed: str | None = None) -> str:
    """Write ``size`` deterministic bytes in 1 MiB chunks; return their SHA-256."""
    path.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    with path.open("wb") as file:
        for chunk in pattern_chunks(size, seed or path.name):
            digest.update(chunk)
            file.write(chunk)
    return digest.hexdigest()


class Background:
    """Run a function in a thread; :meth:`result` joins it and re-raises its error."""

    def __init__(self, target: Callable[[], object], *, delay: float = 0.0) -> None:
        self._target = target
        self._delay = delay
        self._error: BaseException | None = None
        self._value: object = None
        self.finished_at: float | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            if self._delay:
                time.sleep(self._delay)
            self._value = self._target()
        except BaseException as error:
            self._error = error
        finally:
            self.finished_at = time.monotonic()

    def result(self, timeout: float = 60.0) -> object:
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError("the background task did not finish")
        if self._error is not None:
            raise self._error
        return self._value


# --- the server ---------------------------------------------------------------------------


class DemoServer:
    """One ``arkvory_sched.demo serve`` process; :meth:`restart` keeps directory and port."""

    def __init__(
        self,
        root: Path,
        log_path: Path,
        *,
        env: Mapping[str, str],
        bandwidth: int | None,
        tokens: Sequence[str],
    ) -> None:
        self.root = root
        self.log_path = log_path
        self.port = free_port()
        self.base_url = f"http://{HOST}:{self.port}"
        self._env = {k: v for k, v in os.environ.items() if not k.startswith("ARKVORY_")}
        self._env.update(env)
        self._env["PYTHONUNBUFFERED"] = "1"
        self._argv = [
            sys.executable,
            "-m",
            "arkvory_sched.demo",
            "serve",
            str(root),
            "--host",
            HOST,
            "--port",
            str(self.port),
        ]
        if bandwidth is not None:
            self._argv += ["--bandwidth", str(bandwidth)]
        for token in tokens:
            self._argv += ["--token", token]
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self._process is not None, "the server is not running"
        return self._process.pid

    def url(self, name: str) -> str:
        return f"{self.base_url}/files/{name}"

    def start(self) -> None:
        assert self._process is None, "already running"
        self._log = self.log_path.open("ab")
        self._process = subprocess.Popen(
            self._argv,
            env=self._env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        process = self._process
        try:
            wait_ready(
                f"{self.base_url}/readyz",
                time.monotonic() + STARTUP_SECONDS,
                alive=lambda: process.poll() is None,
            )
        except (RuntimeError, TimeoutError) as error:
            self.stop()
            raise RuntimeError(f"{error}\n--- server log ---\n{self.log_tail()}") from None

    def terminate(self) -> None:
        """Send SIGTERM and return at once (:meth:`stop` then waits for the exit)."""
        assert self._process is not None, "the server is not running"
        self._process.send_signal(signal.SIGTERM)

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL after :data:`STOP_SECONDS`; returns the exit code."""
        process, self._process = self._process, None
        code: int | None = None
        if process is not None:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(STOP_SECONDS)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(STOP_SECONDS)
            code = process.returncode
        if self._log is not None:
            self._log.close()
            self._log = None
        return code

    def restart(self) -> None:
        self.stop()
        self.start()

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    # -- observations ----------------------------------------------------------------------
    def readiness(self) -> dict[str, Any]:
        response = httpx.get(f"{self.base_url}/readyz", timeout=5.0)
        document: dict[str, Any] = json.loads(response.content)
        return document

    def metric(self, name: str, **labels: str) -> float:
        """One sample of ``/metrics`` (full name), 0.0 when it is absent."""
        text = httpx.get(f"{self.base_url}/metrics", timeout=5.0).text
        wanted = name
        if labels:
            inner = ",".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
            wanted = f"{name}{{{inner}}}"
        for line in text.splitlines():
            if line.startswith("#"):
                continue
            sample, _, value = line.rpartition(" ")
            if _canonical(sample) == wanted:
                return float(value)
        return 0.0

    def wait_idle(self, timeout: float = 10.0) -> dict[str, Any]:
        """Wait until no session is active, waiting or held; return that readiness."""
        seen: dict[str, Any] = {}

        def idle() -> bool:
            nonlocal seen
            seen = self.readiness()
            counts = (seen["active"], seen["waiting"], seen["held"], seen["requests"]["active"])
            return counts == (0, 0, 0, 0)

        wait_until(idle, timeout, "the scheduler to be idle (nothing active, waiting or held)")
        return seen


def _canonical(sample: str) -> str:
    """``name{b="2",a="1"}`` with its labels sorted, to compare regardless of order."""
    name, brace, rest = sample.partition("{")
    if not brace:
        return name
    parts = sorted(part for part in rest.rstrip("}").split(",") if part)
    return f"{name}{{{','.join(parts)}}}"


class StartServer(Protocol):
    def __call__(
        self,
        *,
        env: Mapping[str, str] | None = None,
        bandwidth: int | None = None,
        tokens: Sequence[str] = (),
    ) -> DemoServer: ...


#: Small, quiet defaults: one slot, no interactive reserve, so that a second download
#: always waits; objects above 1 MiB use sessions so test files stay small.
ONE_SLOT: Mapping[str, str] = {
    "ARKVORY_MAX_DOWNLOAD_SESSIONS": "1",
    "ARKVORY_DOWNLOAD_RESERVE": "0",
    "ARKVORY_DOWNLOAD_SESSION_MIN_BYTES": "1MiB",
    "ARKVORY_DOWNLOAD_PREEMPT": "false",
}


@pytest.fixture
def demo_root(tmp_path: Path) -> Path:
    """The directory the demo serves (empty; tests write their files into it)."""
    root = tmp_path / "served"
    root.mkdir()
    return root


@pytest.fixture
def start_server(demo_root: Path, tmp_path: Path) -> Iterator[StartServer]:
    """Start demo servers on ``demo_root``; every one is stopped at teardown."""
    started: list[DemoServer] = []

    def start(
        *,
        env: Mapping[str, str] | None = None,
        bandwidth: int | None = None,
        tokens: Sequence[str] = (),
    ) -> DemoServer:
        log = tmp_path / f"server-{len(started)}.log"
        server = DemoServer(demo_root, log, env=env or {}, bandwidth=bandwidth, tokens=tokens)
        started.append(server)
        server.start()
        return server

    yield start
    for server in started:
        server.stop()


class SlotHolder:
    """Keeps a session slot busy with a real, incomplete download that has an id.

    :meth:`take` reads the first MiB of ``name`` (the session is active and not complete,
    so it holds its slot for ``idleSeconds``); :meth:`finish` reads the rest, which
    completes the session and frees the slot at once.
    """

    def __init__(self, server: DemoServer, name: str, download_id: str) -> None:
        self.server = server
        self.name = name
        self.headers = {"Arkvory-Download-Id": download_id}

    def take(self) -> None:
        headers = {**self.headers, "Range": f"bytes=0-{MIB - 1}"}
        response = httpx.get(self.server.url(self.name), headers=headers, timeout=10.0)
        assert response.status_code == 206, response.text
        assert len(response.content) == MIB

    def finish(self) -> None:
        headers = {**self.headers, "Range": f"bytes={MIB}-"}
        response = httpx.get(self.server.url(self.name), headers=headers, timeout=30.0)
        assert response.status_code == 206, response.text
