"""Fixtures of the integration suite: the demo artifact server as a real subprocess.

Nothing is mocked. ``start_server`` runs ``python -m arkvory_sched.demo serve`` on a
loopback port the system chooses (``--port 0``, read back from its log: a port picked
beforehand could be taken by another process first) with the ``ARKVORY_*`` variables a
test chooses (and none inherited from the caller), waits for ``/readyz`` and stops it at
teardown (SIGTERM, then SIGKILL).
Files are written into the served directory with deterministic bytes, so every download
is checked against a known SHA-256.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
import signal
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
#: How long a test waits for something a quiet machine does at once (a request held, a
#: slot taken or freed, a line printed): only a hang takes this long, so waiting this
#: long bounds nothing a test asserts, and a loaded machine never reaches it.
SETTLE_SECONDS = 30.0


# --- small helpers ------------------------------------------------------------------------


#: What uvicorn logs once it listens; with ``--port 0`` it names the port the system chose.
LISTENING = re.compile(rb"Uvicorn running on http://[^\s:]+:(\d+)")


def wait_listening(
    log_path: Path, offset: int, deadline: float, *, alive: Callable[[], bool]
) -> int:
    """The port a server started with ``--port 0`` listens on, read from its log.

    The server binds a port the system chooses (no port picked beforehand, which
    another process could take first). ``offset`` is where this run's output starts in
    the log; ``deadline`` is a :func:`time.monotonic` value.
    """
    while True:
        with log_path.open("rb") as log:
            log.seek(offset)
            match = LISTENING.search(log.read())
        if match is not None:
            return int(match.group(1))
        if not alive():
            raise RuntimeError(f"the server exited before it listened ({log_path})")
        if time.monotonic() >= deadline:
            raise TimeoutError(f"the server did not listen before the deadline ({log_path})")
        time.sleep(POLL_SECONDS)


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


def stop_process(process: subprocess.Popen[Any]) -> int:
    """SIGTERM, then SIGKILL after :data:`STOP_SECONDS`; returns the exit code."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(STOP_SECONDS)
    return process.returncode


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


class StreamLines:
    """Collects the lines of a child process's text stream, in a thread, as they come."""

    def __init__(self, stream: IO[str]) -> None:
        self.lines: list[str] = []
        self._stream = stream
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        with self._stream:  # closed at its end, when the child has exited
            for line in self._stream:
                self.lines.append(line.rstrip("\n"))

    def text(self) -> str:
        return "\n".join(self.lines)

    def join(self, timeout: float = STOP_SECONDS) -> str:
        """Wait for the end of the stream (the child exited); all of its text."""
        self._thread.join(timeout)
        return self.text()


# --- the server ---------------------------------------------------------------------------


class DemoServer:
    """One ``arkvory_sched.demo serve`` process; :meth:`restart` keeps its directory."""

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
        self.port = 0  # the port the running server listens on (chosen by the system)
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
            "0",
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

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def url(self, name: str) -> str:
        return f"{self.base_url}/files/{name}"

    def start(self) -> None:
        """Start the process on a port of the system's choosing (a restart gets a new
        one) and wait until it is ready."""
        assert self._process is None, "already running"
        self._log = self.log_path.open("ab")
        offset = self._log.tell()
        self._process = subprocess.Popen(
            self._argv,
            env=self._env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        process = self._process
        deadline = time.monotonic() + STARTUP_SECONDS
        try:
            self.port = wait_listening(
                self.log_path, offset, deadline, alive=lambda: process.poll() is None
            )
            wait_ready(f"{self.base_url}/readyz", deadline, alive=lambda: process.poll() is None)
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
            code = stop_process(process)
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

    def wait_idle(self, timeout: float = SETTLE_SECONDS) -> dict[str, Any]:
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
