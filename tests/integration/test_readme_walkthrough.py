"""The README's walk, run as a newcomer runs it: its own commands against ``make run``.

The server is started by the very commands ``make run`` runs (read with ``make -n``,
on a port the system chooses, serving a fresh directory); each README block is run as
written in ``bash`` with only ``make run``'s address changed to that port (issue #29):

- the operator's tour, twice in a row: it must not depend on the revision it finds;
- the SDK example downloads the file and reports ``result.waited`` in seconds;
- fifteen slow downloads fill the slots, and the ``curl`` that has no download id is
  held and then told its place and start in a ``503``;
- ``arkvoryctl`` waits in that busy queue and downloads the file byte for byte once
  the slots free (the test ends the slow downloads when it has seen the wait);
- the scrape of ``/metrics`` and ``/readyz``.

The only other differences from ``make run`` are two settings of the environment that
make the walk quick without changing a command: a hold of 1 s instead of 20 s
(``ARKVORY_DOWNLOAD_HOLD_SECONDS``), so the ``curl`` block answers in a second, and an
idle time of 1 s (``ARKVORY_DOWNLOAD_IDLE_SECONDS``), so the slots of the slow
downloads the test ends are free a second later rather than five.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import httpx
import pytest

from tests.readme_fences import ROOT, fence, fences

from .conftest import (
    SETTLE_SECONDS,
    STARTUP_SECONDS,
    STOP_SECONDS,
    StreamLines,
    require_tool,
    sha256_file,
    stop_process,
    wait_listening,
    wait_ready,
    wait_until,
)

RUN_SECONDS: Final = 60.0
OPERATOR: Final = {"authorization": "Bearer operator-token"}
SETTINGS_PATH: Final = "/api/v1/system/downloads/settings"
#: The tour's writes, each one revision (weights; windows and classes; back to {}).
TOUR_WRITES: Final = 3
FILLERS: Final = 15  # the slow downloads of README section 1


def _environment() -> dict[str, str]:
    """The caller's environment with absolute ``PYTHONPATH`` entries (the blocks run in
    other directories) and none of its ``ARKVORY_*`` settings; a 1 s hold and idle time."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("ARKVORY_")}
    paths = [os.path.abspath(entry) for entry in env.get("PYTHONPATH", "").split(os.pathsep)]
    env["PYTHONPATH"] = os.pathsep.join(entry for entry in paths if entry != os.path.abspath(""))
    if not env["PYTHONPATH"]:
        del env["PYTHONPATH"]
    env["ARKVORY_DOWNLOAD_HOLD_SECONDS"] = "1"
    env["ARKVORY_DOWNLOAD_IDLE_SECONDS"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def make_run_commands(example_dir: Path) -> list[list[str]]:
    """The ``arkvory-demo`` commands of ``make run``, on a port the system chooses."""
    make = require_tool("make")
    printed = subprocess.run(
        [make, "-n", "run", "PORT=0", f"EXAMPLE_DIR={example_dir}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=RUN_SECONDS,
    ).stdout
    lines = printed.replace("\\\n", " ").splitlines()
    commands = [shlex.split(line) for line in lines if "arkvory-demo" in line]
    assert [command[1] for command in commands] == ["example", "serve"], printed
    return commands


@dataclass
class Demo:
    port: int
    root: Path
    env: dict[str, str]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def readiness(self) -> dict[str, Any]:
        document: dict[str, Any] = httpx.get(f"{self.base_url}/readyz", timeout=5.0).json()
        return document

    def settings(self) -> dict[str, Any]:
        response = httpx.get(self.base_url + SETTINGS_PATH, headers=OPERATOR, timeout=5.0)
        assert response.status_code == 200, response.text
        document: dict[str, Any] = response.json()
        return document


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    """``make run``'s server, from a fresh example directory."""
    base = tmp_path_factory.mktemp("make-run")
    example, serve = make_run_commands(base / "artifacts")
    env = _environment()
    subprocess.run(example, cwd=ROOT, env=env, check=True, capture_output=True, timeout=RUN_SECONDS)
    log_path = base / "server.log"
    with log_path.open("wb") as log:
        server = subprocess.Popen(
            serve, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log
        )
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        port = wait_listening(log_path, 0, deadline, alive=lambda: server.poll() is None)
        wait_ready(f"http://127.0.0.1:{port}/readyz", deadline)
        yield Demo(port, base / "artifacts", env)
    finally:
        stop_process(server)


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A directory standing in for the checkout: its ``.venv`` is the suite's own, as
    ``make run`` leaves it, and a download lands here, not in the real checkout."""
    venv = ROOT / ".venv"
    assert (venv / "bin" / "arkvoryctl").exists(), "make install creates .venv"
    (tmp_path / ".venv").symlink_to(venv)
    return tmp_path


def bash(script: str, demo: Demo, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """Run a README block in ``bash``, failing at its first failing command."""
    return run(["bash", "-euo", "pipefail", "-c", script], demo, cwd)


def run(argv: list[str], demo: Demo, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` in the demo's environment, its output captured as text."""
    return subprocess.run(
        argv,
        cwd=cwd,
        env=demo.env,
        capture_output=True,
        text=True,
        timeout=RUN_SECONDS,
        check=False,
    )


def test_every_shell_block_is_valid_in_the_shell_its_fence_names() -> None:
    """An ``sh`` block must be POSIX (Debian's ``sh`` is dash, which has no arrays):
    bash-only commands go in a ``bash`` block."""
    posix = shutil.which("dash") or require_tool("sh")
    checked = 0
    for block in fences():
        shell = {"sh": posix, "bash": "bash"}.get(block.language)
        if shell is None:
            continue
        parsed = subprocess.run(
            [shell, "-n"], input=block.text, capture_output=True, text=True, check=False
        )
        assert parsed.returncode == 0, f"README line {block.line} ({shell}): {parsed.stderr}"
        checked += 1
    assert checked >= 10


def test_the_operator_tour_runs_as_written_twice_in_a_row(demo: Demo) -> None:
    require_tool("curl")
    tour = fence("$API/settings/history", language="bash").at_port(demo.port)
    before = demo.settings()["revision"]
    for run in (1, 2):
        done = bash(tour, demo)
        assert done.returncode == 0, f"run {run}: {done.stderr}\n{done.stdout[-2000:]}"
        assert "revision_mismatch" not in done.stdout
        after = demo.settings()
        # Each change applied: three new revisions, and the tour's last one restored
        # the environment's settings.
        assert after["revision"] == before + run * TOUR_WRITES
        assert after["record"] == {}
    history = httpx.get(
        demo.base_url + SETTINGS_PATH + "/history?limit=20", headers=OPERATOR, timeout=5.0
    ).json()
    outcomes = [entry["outcome"] for entry in history["entries"]]
    assert outcomes[: 2 * TOUR_WRITES] == ["applied"] * (2 * TOUR_WRITES)


def test_the_sdk_example_downloads_and_reports_its_wait_in_seconds(
    demo: Demo, checkout: Path
) -> None:
    code = fence("from arkvory_client import Client", language="python").at_port(demo.port)
    done = run([sys.executable, "-c", code], demo, checkout)
    assert done.returncode == 0, done.stderr
    path, size, waited = done.stdout.splitlines()[-1].split()
    assert (path, int(size)) == (
        "image-1.bin",
        (demo.root / "large" / "image-1.bin").stat().st_size,
    )
    assert float(waited) >= 0.0
    assert sha256_file(checkout / "image-1.bin") == sha256_file(demo.root / "large" / "image-1.bin")


def test_a_newcomer_reaches_a_download_through_a_busy_queue(demo: Demo, checkout: Path) -> None:
    require_tool("curl")
    fill = fence("--limit-rate", language="bash").at_port(demo.port)
    fillers = subprocess.Popen(
        ["bash", "-c", fill], cwd=checkout, env=demo.env, start_new_session=True
    )
    try:
        wait_until(
            lambda: demo.readiness()["active"] == FILLERS, SETTLE_SECONDS, "the slots to fill"
        )
        # curl without a download id: held, then the place and the start in a 503.
        held = bash(fence("-D -", language="bash").at_port(demo.port), demo, checkout)
        assert held.returncode == 0, held.stderr
        status, *lines = held.stdout.splitlines()
        headers = {
            name.lower(): value
            for name, _, value in (line.partition(": ") for line in lines)
            if value
        }
        assert status.startswith("HTTP/1.1 503"), held.stdout
        assert headers["content-type"] == "application/problem+json"
        assert int(headers["retry-after"]) >= 1
        assert re.fullmatch(r"\S+Z; earliest=\S+Z; latest=\S+Z", headers["arkvory-starts-at"])

        # arkvoryctl waits in the busy queue, then gets the file once the slots free.
        cli = subprocess.Popen(
            [
                "bash",
                "-euo",
                "pipefail",
                "-c",
                fence("arkvoryctl download", "bash").at_port(demo.port),
            ],
            cwd=checkout,
            env=demo.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert cli.stdout is not None
        output = StreamLines(cli.stdout)
        wait_until(lambda: "queued, " in output.text(), SETTLE_SECONDS, "arkvoryctl to queue")
    finally:
        _end_group(fillers)
    assert cli.wait(RUN_SECONDS) == 0, output.join()
    assert sha256_file(checkout / "image-1.bin") == sha256_file(demo.root / "large" / "image-1.bin")
    # It said it waited, and when it would start (the place comes from the second answer
    # on, R-EST-3), then saved the file.
    assert re.search(r"^queued, (\d+(st|nd|rd|th), )?start ≈ \d\d:\d\d", output.join(), re.M)
    assert output.join().splitlines()[-1].startswith("saved image-1.bin")


def test_the_scrape_shows_metrics_and_readiness(demo: Demo) -> None:
    require_tool("curl")
    done = bash(fence("/metrics | grep", language="sh").at_port(demo.port), demo)
    assert done.returncode == 0, done.stderr
    metrics, _, readiness = done.stdout.rpartition("\n{")
    assert "arkvory_download_queue_empty_in_seconds" in metrics
    assert json.loads("{" + readiness)["status"] == "ok"


def _end_group(process: subprocess.Popen[bytes]) -> None:
    """End the slow downloads: the process group the test started them in."""
    with contextlib.suppress(ProcessLookupError):  # every one of them has ended already
        os.killpg(process.pid, signal.SIGTERM)
    process.wait(STOP_SECONDS)
