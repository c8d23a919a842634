"""How sessions end on the real server: a dropped client, a resume, a shutdown.

A client that drops mid-file must not keep its slot (R-RES-3, R-SESS-10); resuming
the file must complete the session (R-SESS-8); on shutdown held clients get ``503``
and the process does not wait for their hold to run out (R-RES-4).
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from .conftest import (
    MIB,
    ONE_SLOT,
    SlotHolder,
    StartServer,
    require_tool,
    sha256_file,
    wait_until,
    write_pattern_file,
)

CLIENT_TIMEOUT = 60.0
BANDWIDTH = 4_000_000  # bytes/s: an 8 MiB file takes about 2 s


def test_a_dropped_download_frees_its_slot(
    start_server: StartServer, demo_root: Path, tmp_path: Path
) -> None:
    curl = require_tool("curl")
    write_pattern_file(demo_root / "wanted.bin", 8 * MIB)
    server = start_server(env=ONE_SLOT, bandwidth=BANDWIDTH)
    out = tmp_path / "wanted.bin"

    result = subprocess.run(
        [curl, "-sS", "--max-time", "1", "-o", str(out), server.url("wanted.bin")],
        check=False,
        capture_output=True,
        timeout=CLIENT_TIMEOUT,
    )
    assert result.returncode == 28, result.stderr.decode()  # curl gave up mid-file
    assert 0 < out.stat().st_size < 8 * MIB
    dropped = time.monotonic()

    # Nothing in flight and nothing delivered in full: the slot is held only as long as
    # a tail read (5 s), not idleSeconds (30 s); the download keeps its place, paused.
    readiness = server.wait_idle(timeout=10.0)
    assert time.monotonic() - dropped < 9.0
    assert readiness["classes"]["release"]["paused"] == 1
    assert server.metric("arkvory_download_completed_total") == 0
    assert server.metric("arkvory_download_idle_releases_total") == 1


def test_curl_resume_after_a_drop_completes_the_session(
    start_server: StartServer, demo_root: Path, tmp_path: Path
) -> None:
    curl = require_tool("curl")
    expected = write_pattern_file(demo_root / "wanted.bin", 8 * MIB)
    server = start_server(env=ONE_SLOT, bandwidth=BANDWIDTH)
    out = tmp_path / "wanted.bin"
    url = server.url("wanted.bin")

    dropped = subprocess.run(
        [curl, "-sS", "--max-time", "1", "-o", str(out), url],
        check=False,
        capture_output=True,
        timeout=CLIENT_TIMEOUT,
    )
    assert dropped.returncode == 28, dropped.stderr.decode()
    resumed = subprocess.run(
        [curl, "-sS", "-C", "-", "-o", str(out), "-w", "%{http_code}", url],
        capture_output=True,
        timeout=CLIENT_TIMEOUT,
        check=True,
    )
    assert resumed.stdout.decode() == "206"
    assert sha256_file(out) == expected

    server.wait_idle(timeout=3.0)
    assert server.metric("arkvory_download_completed_total") == 1


def test_sigterm_answers_held_requests_at_once(
    start_server: StartServer, demo_root: Path, tmp_path: Path
) -> None:
    curl = require_tool("curl")
    write_pattern_file(demo_root / "busy.bin", 2 * MIB)
    write_pattern_file(demo_root / "wanted.bin", 2 * MIB)
    server = start_server(env={**ONE_SLOT, "ARKVORY_DOWNLOAD_HOLD_SECONDS": "5"})
    SlotHolder(server, "busy.bin", "holder").take()
    out = tmp_path / "answer.json"
    process = subprocess.Popen(
        [curl, "-sS", "-o", str(out), "-w", "%{http_code}", server.url("wanted.bin")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        wait_until(lambda: server.readiness()["held"] == 1, 5.0, "curl's request to be held")
        signalled = time.monotonic()
        server.terminate()
        stdout, _ = process.communicate(timeout=CLIENT_TIMEOUT)
        answered = time.monotonic() - signalled
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
        server.stop()

    assert stdout.decode() == "503"
    problem = json.loads(out.read_bytes())
    assert answered < 2.0, f"the held request was answered {answered:.1f} s after SIGTERM"
    assert problem.get("busyReason") == "shutting_down", problem
