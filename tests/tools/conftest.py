"""The demo server with its only slot busy, for the tests of docs/clients.md's recipes.

Each test runs a real tool (curl, wget, aria2c, pip, npm) the way a person would, against
the real demo server (uvicorn on loopback, started as the integration suite starts it),
while the only session slot is held by another download. The tool's request has no
``Arkvory-Download-Id``, so the server holds it for the hold (1 s here, 20 s by default)
and then answers ``503`` with ``Retry-After``: the tool meets a queue that is busy past
the hold, and its own retry options decide what happens next.

The server is configured so that this happens in seconds: one session slot without a
reserve, no preemption, a hold of 1 s, a declared link of 1 GB/s (so ``Retry-After`` is
the head of the queue's 1 or 2 s), and a session threshold of 16 KiB, so the test
packages (about 66 KB) queue as download sessions like a multi-gigabyte artifact would.
Below the threshold the demo admits objects per request (16 places, then a wait of up to
20 s, then ``503`` with ``Retry-After`` and no place in a queue); a tool sees the same
hold-then-``503`` there, but a test would need a slow transfer to keep a place busy.

The tool talks to a :class:`RecordingProxy` in front of the server, which notes when
each request arrived and what it was answered. The slot is freed only once the tool has
been answered ``503`` as many times as the test asks — seen on the wire, not guessed
from a sleep — and the gaps between a ``503`` and the tool's next request show whether
it waited what ``Retry-After`` said or its own delay.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import httpx
import pytest

from tests.integration.conftest import SETTLE_SECONDS, DemoServer, StreamLines, sha256_file

from ._recorder import Exchange, RecordingProxy

__all__ = [
    "CLIENT_TIMEOUT",
    "HOLD_SECONDS",
    "BusyQueue",
    "Invocation",
    "ToolRun",
    "sha256_file",
]

HOLD_SECONDS: Final = 1.0
QUEUE_ENV: Final[Mapping[str, str]] = {
    "ARKVORY_MAX_DOWNLOAD_SESSIONS": "1",
    "ARKVORY_DOWNLOAD_RESERVE": "0",
    "ARKVORY_DOWNLOAD_PREEMPT": "false",
    "ARKVORY_DOWNLOAD_SESSION_MIN_BYTES": "16KiB",
    "ARKVORY_DOWNLOAD_HOLD_SECONDS": str(HOLD_SECONDS),
    # A floor for the rate behind start estimates (no cap): what is left of the busy
    # download is expected to take no time whatever the earlier tests' small transfers
    # measured, so the tool at the head of the queue is asked back after 1 or 2 s.
    "ARKVORY_DOWNLOAD_BANDWIDTH": "1GB",
}
#: Only a hang takes this long: every tool here ends within seconds.
CLIENT_TIMEOUT: Final = 90.0
BUSY_NAME: Final = "busy.bin"
BUSY_BYTES: Final = 256 * 1024
_FIRST_RANGE: Final = 1024


@dataclass(frozen=True, slots=True)
class ToolRun:
    """What one run of a tool did: its exit code, its output, its requests."""

    returncode: int
    output: str
    exchanges: list[Exchange]

    @property
    def statuses(self) -> list[int | None]:
        return [exchange.status for exchange in self.exchanges]

    def waits(self) -> list[tuple[int | None, float]]:
        """For each ``503``: the ``Retry-After`` it carried and the seconds from it to
        the tool's next request."""
        found = []
        for answer, following in zip(self.exchanges, self.exchanges[1:], strict=False):
            if answer.status == 503 and answer.answered is not None:
                found.append((answer.retry_after, following.asked - answer.answered))
        return found


class BusySlot:
    """A download with an id that holds the only session slot until :meth:`release`.

    :meth:`take` reads the first KiB of the busy file: the session is active and not
    complete, so it keeps the slot (for up to ``idleSeconds``, 30 s). :meth:`release`
    reads the rest, which completes the session and frees the slot at once.
    """

    def __init__(self, server: DemoServer) -> None:
        self._url = server.url(BUSY_NAME)
        self._id = {"Arkvory-Download-Id": f"slot-holder-{uuid.uuid4()}"}
        self.released = False

    def take(self) -> None:
        headers = {**self._id, "Range": f"bytes=0-{_FIRST_RANGE - 1}"}
        response = httpx.get(self._url, headers=headers, timeout=SETTLE_SECONDS)
        assert response.status_code == 206, response.text

    def release(self) -> None:
        if self.released:
            return
        self.released = True
        headers = {**self._id, "Range": f"bytes={_FIRST_RANGE}-"}
        response = httpx.get(self._url, headers=headers, timeout=SETTLE_SECONDS)
        assert response.status_code == 206, response.text


class BusyQueue:
    """The demo server, the proxy in front of it, and runs of tools against both."""

    def __init__(self, server: DemoServer, proxy: RecordingProxy) -> None:
        self.server = server
        self.proxy = proxy

    @property
    def root(self) -> Path:
        return self.server.root

    def url(self, name: str) -> str:
        """The address of a served file, through the proxy."""
        return self.proxy.url(f"/files/{name}")

    def busy_slot(self) -> BusySlot:
        slot = BusySlot(self.server)
        slot.take()
        assert self.server.readiness()["active"] == 1
        return slot

    def start(
        self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str] | None = None
    ) -> tuple[subprocess.Popen[str], StreamLines]:
        """Start a tool, its standard error merged into its output."""
        process = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
        assert process.stdout is not None
        return process, StreamLines(process.stdout)

    def run(
        self,
        argv: Sequence[str],
        *,
        name: str,
        cwd: Path,
        refusals: int,
        env: Mapping[str, str] | None = None,
    ) -> ToolRun:
        """Run a tool for the served file ``name`` while the slot is busy, and free the
        slot once the tool has been answered ``503`` ``refusals`` times."""
        path = f"/files/{name}"
        slot = self.busy_slot()
        process, output = self.start(argv, cwd=cwd, env=env)
        try:
            refused = self.proxy.wait_for(
                lambda seen: _answered(seen, path, 503) >= refusals or process.poll() is not None,
                CLIENT_TIMEOUT,
            )
            assert refused and process.poll() is None, (
                f"the tool was not refused {refusals} times while it waited:\n{output.text()}"
            )
            slot.release()
            process.wait(CLIENT_TIMEOUT)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
            slot.release()
        run = ToolRun(process.returncode, output.join(), self.proxy.exchanges(path))
        self.server.wait_idle()
        return run

    def run_while_busy(self, invocations: Mapping[str, Invocation]) -> dict[str, ToolRun]:
        """Run several tools at once, each for its own served file, while the slot stays
        busy until all have given up; their runs by the invocations' keys.

        The tools' waiting downloads stay in the queue until they count as no-shows, so
        a module that lets tools give up needs a server of its own.
        """
        slot = self.busy_slot()
        started = {
            key: self.start(call.argv, cwd=call.cwd, env=call.env)
            for key, call in invocations.items()
        }
        try:
            for process, _output in started.values():
                process.wait(CLIENT_TIMEOUT)
        finally:
            for process, _output in started.values():
                if process.poll() is None:
                    process.kill()
                    process.wait()
            slot.release()
        return {
            key: ToolRun(
                process.returncode,
                output.join(),
                self.proxy.exchanges(f"/files/{invocations[key].name}"),
            )
            for key, (process, output) in started.items()
        }


@dataclass(frozen=True, slots=True)
class Invocation:
    """One tool's command line for the served file ``name``, in ``cwd``."""

    argv: Sequence[str]
    name: str
    cwd: Path
    env: Mapping[str, str] | None = None


def _answered(exchanges: list[Exchange], path: str, status: int) -> int:
    return sum(1 for e in exchanges if e.target == path and e.status == status)


def tool_environment(**extra: str) -> dict[str, str]:
    """The test's environment without the machine's pip settings, plus ``extra``.

    pip reads ``PIP_*`` variables before any configuration file (this machine sets
    ``PIP_DEFAULT_TIMEOUT``), so a recipe's pip.conf is tested only without them.
    """
    env = {key: value for key, value in os.environ.items() if not key.startswith("PIP_")}
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def busy_queue(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BusyQueue]:
    """One demo server and proxy per test module; each test writes its own files."""
    root = tmp_path_factory.mktemp("served")
    (root / BUSY_NAME).write_bytes(os.urandom(BUSY_BYTES))
    server = DemoServer(
        root, root.parent / f"{root.name}.log", env=QUEUE_ENV, bandwidth=None, tokens=()
    )
    server.start()
    try:
        with RecordingProxy(server.port) as proxy:
            yield BusyQueue(server, proxy)
    finally:
        server.stop()
