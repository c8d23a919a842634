"""``arkvoryctl`` as a real process against the real demo server (nothing mocked).

The server runs with one session slot and a 20 MB/s link, so a 64 MiB download takes a
few seconds and a second download must queue. Proven here: a download waits through a
busy queue and completes byte for byte, printing its place and then its progress
(R-CLI-1, R-VIS-1); Ctrl-C exits 130 and keeps the checkpoint, and a new process
continues the same download (same id, from the saved bytes); on a real terminal (a
pseudo-terminal) the status line and the progress bar are drawn.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import signal
import struct
import subprocess
import sys
import termios
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from tests.integration.conftest import (
    MIB,
    ONE_SLOT,
    SETTLE_SECONDS,
    DemoServer,
    SlotHolder,
    sha256_file,
    wait_until,
    write_pattern_file,
)

BANDWIDTH = 20_000_000  # bytes/s: 64 MiB take about 3.4 s
SIZE = 64 * MIB
RUN_SECONDS = 45.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoServer]:
    """One demo server for the module: one slot, no interactive reserve."""
    base = tmp_path_factory.mktemp("arkvoryctl-server")
    root = base / "served"
    root.mkdir()
    demo = DemoServer(root, base / "server.log", env=ONE_SLOT, bandwidth=BANDWIDTH, tokens=())
    demo.start()
    yield demo
    demo.stop()


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARKVORY_")}
    env.pop("FORCE_COLOR", None)
    return {**env, "PYTHONUNBUFFERED": "1", **extra}


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "arkvory_client._cli", "download", *args]


class Lines:
    """Collects the lines of a child's stream as they arrive."""

    def __init__(self, stream: IO[str]) -> None:
        self.lines: list[str] = []
        self._stream = stream
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for line in self._stream:
            self.lines.append(line.rstrip("\n"))

    def join(self) -> list[str]:
        self._thread.join(10)
        return list(self.lines)


class Cli:
    """One ``arkvoryctl download`` process with stdout and stderr on pipes."""

    def __init__(self, cwd: Path, *args: str) -> None:
        self.process = subprocess.Popen(
            command(*args),
            cwd=cwd,
            env=child_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
        assert self.process.stdout is not None and self.process.stderr is not None
        self.out = Lines(self.process.stdout)
        self.err = Lines(self.process.stderr)

    def finish(self, timeout: float = RUN_SECONDS) -> tuple[int, list[str], str]:
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            pytest.fail(f"arkvoryctl did not finish in {timeout} s: {self.out.lines}")
        out, err = self.out.join(), self.err.join()
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
        return code, out, "\n".join(err)


def index_of(lines: list[str], prefix: str) -> int:
    return next(i for i, line in enumerate(lines) if line.startswith(prefix))


def test_a_download_waits_through_a_busy_queue(server: DemoServer, tmp_path: Path) -> None:
    expected = write_pattern_file(server.root / "queued.bin", SIZE)
    write_pattern_file(server.root / "holder-a.bin", 4 * MIB)
    holder = SlotHolder(server, "holder-a.bin", "holder-a")
    holder.take()  # another client holds the only slot

    cli = Cli(tmp_path, server.url("queued.bin"))
    wait_until(
        lambda: any(line.startswith("queued") for line in cli.out.lines), SETTLE_SECONDS, "queued"
    )
    holder.finish()  # the slot frees; the queued download takes it
    code, lines, err = cli.finish()

    assert code == 0, (lines, err)
    assert sha256_file(tmp_path / "queued.bin") == expected
    queued, started = index_of(lines, "queued"), index_of(lines, "downloading queued.bin")
    assert queued < started
    assert lines[started] == "downloading queued.bin (64.0 MiB)"
    assert any(" of 64.0 MiB (" in line for line in lines[started:]), lines
    assert lines[-2].startswith("64.0 MiB of 64.0 MiB (100 %)")
    assert lines[-1] == "saved queued.bin (64.0 MiB)"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["queued.bin"]


def test_ctrl_c_then_a_new_process_continues_the_same_download(
    server: DemoServer, tmp_path: Path
) -> None:
    expected = write_pattern_file(server.root / "interrupted.bin", SIZE)
    checkpoint = tmp_path / "interrupted.bin.arkvory.json"

    def saved() -> dict[str, Any]:
        try:
            document: dict[str, Any] = json.loads(checkpoint.read_text())
        except (OSError, ValueError):
            return {}
        return document

    cli = Cli(tmp_path, server.url("interrupted.bin"))

    def frozen_with_saved_bytes() -> bool:
        # Looked at while the process is stopped: what it saved cannot change (nor the
        # download end) between this look and the Ctrl-C below.
        cli.process.send_signal(signal.SIGSTOP)
        if saved().get("done", 0) > 0:
            return True
        cli.process.send_signal(signal.SIGCONT)
        return False

    wait_until(frozen_with_saved_bytes, SETTLE_SECONDS, "a checkpoint with saved bytes")
    cli.process.send_signal(signal.SIGINT)  # delivered first thing when it runs again
    cli.process.send_signal(signal.SIGCONT)
    code, lines, err = cli.finish()

    assert code == 130, (lines, err)
    assert "interrupted; run the same command to continue" in err
    kept = saved()
    assert kept["downloadId"] and kept["url"] == server.url("interrupted.bin")
    assert 0 < kept["done"] < SIZE
    assert (tmp_path / "interrupted.bin.part").stat().st_size >= kept["done"]

    again = Cli(tmp_path, server.url("interrupted.bin"), "--json")
    code, lines, err = again.finish()
    assert code == 0, (lines, err)
    events = [json.loads(line) for line in lines]
    started = next(event for event in events if event["event"] == "started")
    assert started["downloadId"] == kept["downloadId"]
    assert started["offset"] == kept["done"]
    assert events[-1]["event"] == "completed"
    assert events[-1]["downloadId"] == kept["downloadId"]
    assert sha256_file(tmp_path / "interrupted.bin") == expected
    assert not checkpoint.exists()


def test_a_terminal_shows_the_queue_line_and_a_progress_bar(
    server: DemoServer, tmp_path: Path
) -> None:
    expected = write_pattern_file(server.root / "terminal.bin", 32 * MIB)
    write_pattern_file(server.root / "holder-c.bin", 4 * MIB)
    holder = SlotHolder(server, "holder-c.bin", "holder-c")
    holder.take()

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 120, 0, 0))
    process = subprocess.Popen(
        command(server.url("terminal.bin")),
        cwd=tmp_path,
        env=child_env(TERM="xterm-256color"),
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
    )
    os.close(slave)
    chunks: list[bytes] = []

    def read() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                return
            if not chunk:
                return
            chunks.append(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        wait_until(
            lambda: b"queued" in b"".join(chunks), SETTLE_SECONDS, "the queue line on the terminal"
        )
        holder.finish()
        code = process.wait(RUN_SECONDS)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        reader.join(10)
        os.close(master)

    screen = b"".join(chunks).decode("utf-8", errors="replace")
    assert code == 0, screen
    assert "queued" in screen
    assert "━" in screen  # rich's progress bar
    assert "\x1b[" in screen  # drawn in place with control sequences
    assert "saved terminal.bin (32.0 MiB)" in screen
    assert sha256_file(tmp_path / "terminal.bin") == expected
