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
    SETTLE_SECONDS,
    SlotHolder,
    StartServer,
    require_tool,
    sha256_file,
    wait_until,
    write_pattern_file,
)

CLIENT_TIMEOUT = 60.0
BANDWIDTH = 4_000_000  # bytes/s: an 8 MiB file takes about 2 s
#: ``ARKVORY_DOWNLOAD_IDLE_SECONDS`` here: far beyond the 5 s a tail read holds a slot,
#: so that a slot freed within :data:`SETTLE_SECONDS` was freed by the tail-read rule.
IDLE_SECONDS = 300
#: How long a request without an id is held: far beyond any wait of the test.
HOLD_SECONDS = 300


def drop_mid_file(curl: str, url: str, out: Path, size: int) -> None:
    """curl starts the download and is killed once it has written some bytes: a client
    that gives up mid-file. ``--limit-rate`` keeps it from finishing first on any
    machine: the file would take minutes at that rate."""
    process = subprocess.Popen(
        [curl, "-sS", "--limit-rate", "64K", "-o", str(out), url],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(
            lambda: out.exists() and out.stat().st_size > 0, SETTLE_SECONDS, "curl's first bytes"
        )
    finally:
        process.kill()
        process.wait()
    assert 0 < out.stat().st_size < size  # curl gave up mid-file


def test_a_dropped_download_frees_its_slot(
    start_server: StartServer, demo_root: Path, tmp_path: Path
) -> None:
    curl = require_tool("curl")
    write_pattern_file(demo_root / "wanted.bin", 8 * MIB)
    env = {**ONE_SLOT, "ARKVORY_DOWNLOAD_IDLE_SECONDS": str(IDLE_SECONDS)}
    server = start_server(env=env, bandwidth=BANDWIDTH)

    drop_mid_file(curl, server.url("wanted.bin"), tmp_path / "wanted.bin", 8 * MIB)

    # Nothing in flight and nothing delivered in full: the slot is held only as long as
    # a tail read (5 s), not idleSeconds (300 s here, beyond the wait's deadline); the
    # download keeps its place, paused.
    readiness = server.wait_idle(timeout=SETTLE_SECONDS)
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

    drop_mid_file(curl, url, out, 8 * MIB)
    resumed = subprocess.run(
        [curl, "-sS", "-C", "-", "-o", str(out), "-w", "%{http_code}", url],
        capture_output=True,
        timeout=CLIENT_TIMEOUT,
        check=True,
    )
    assert resumed.stdout.decode() == "206"
    assert sha256_file(out) == expected

    server.wait_idle()
    assert server.metric("arkvory_download_completed_total") == 1


def test_sigterm_answers_held_requests_at_once(
    start_server: StartServer, demo_root: Path, tmp_path: Path
) -> None:
    curl = require_tool("curl")
    write_pattern_file(demo_root / "busy.bin", 2 * MIB)
    write_pattern_file(demo_root / "wanted.bin", 2 * MIB)
    server = start_server(env={**ONE_SLOT, "ARKVORY_DOWNLOAD_HOLD_SECONDS": str(HOLD_SECONDS)})
    SlotHolder(server, "busy.bin", "holder").take()
    out = tmp_path / "answer.json"
    process = subprocess.Popen(
        [curl, "-sS", "-o", str(out), "-w", "%{http_code}", server.url("wanted.bin")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        wait_until(
            lambda: server.readiness()["held"] == 1, SETTLE_SECONDS, "curl's request to be held"
        )
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
    # Answered by the shutdown, not by the end of its hold (300 s away).
    assert answered < SETTLE_SECONDS, f"answered {answered:.1f} s after SIGTERM"
    assert problem.get("busyReason") == "shutting_down", problem
