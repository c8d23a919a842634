"""curl and wget against the real demo server: third-party clients without a download id.

They see only status codes and ``Retry-After`` (R-HOLD-1). Each test keeps the one
session slot busy with another download, then checks what the tool gets: held by the
server and then served, or ``503`` with an honest ``Retry-After`` that its own retry
loop survives — and that the bytes on disk are exactly the file's.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import time
from pathlib import Path

import httpx

from .conftest import (
    MIB,
    ONE_SLOT,
    SETTLE_SECONDS,
    SlotHolder,
    StartServer,
    StreamLines,
    pattern_bytes,
    require_tool,
    sha256_file,
    wait_until,
    write_pattern_file,
)

CLIENT_TIMEOUT = 60.0
BANDWIDTH = 4_000_000  # bytes/s: the other download's last 5 MiB take at least 1.2 s
#: Long enough that curl's request is still held whatever the test waits for meanwhile.
HOLD_SECONDS = 300
RETRY = re.compile(r"Will retry in (\d+) seconds?")


def test_curl_is_held_while_the_slot_is_busy_then_served(
    start_server: StartServer, demo_root: Path, tmp_path: Path
) -> None:
    curl = require_tool("curl")
    busy_expected = write_pattern_file(demo_root / "busy.bin", 6 * MIB)
    expected = write_pattern_file(demo_root / "wanted.bin", 2 * MIB)
    server = start_server(
        env={**ONE_SLOT, "ARKVORY_DOWNLOAD_HOLD_SECONDS": str(HOLD_SECONDS)}, bandwidth=BANDWIDTH
    )

    # Another client (with an id) reads a whole file through the only slot, in ranges
    # the test paces, so that curl surely arrives and waits while the slot is busy.
    busy = httpx.Client(timeout=CLIENT_TIMEOUT)

    def busy_range(start: int, end: int) -> bytes:
        headers = {"Arkvory-Download-Id": "other-client", "Range": f"bytes={start}-{end - 1}"}
        response = busy.get(server.url("busy.bin"), headers=headers)
        assert response.status_code == 206, response.text
        return response.content

    out = tmp_path / "wanted.bin"
    try:
        parts = [busy_range(0, MIB)]
        assert server.readiness()["active"] == 1
        process = subprocess.Popen(
            [
                curl,
                "--silent",
                "--show-error",
                "--output",
                str(out),
                "--write-out",
                "%{http_code}",
                server.url("wanted.bin"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            # The server holds curl's request instead of answering 503 at once …
            wait_until(
                lambda: server.readiness()["held"] == 1, SETTLE_SECONDS, "curl's request held"
            )
            assert process.poll() is None
            released = time.monotonic()
            parts.append(busy_range(MIB, 3 * MIB))
            # … and keeps holding it, unanswered, while the other download goes on: curl's
            # first byte can only come after that download has freed the slot.
            assert server.readiness()["held"] == 1
            assert process.poll() is None
            parts.append(busy_range(3 * MIB, 6 * MIB))
            paced = time.monotonic() - released
            stdout, stderr = process.communicate(timeout=CLIENT_TIMEOUT)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
    finally:
        busy.close()
    assert process.returncode == 0, stderr.decode()
    assert hashlib.sha256(b"".join(parts)).hexdigest() == busy_expected
    # 5 MiB at 4 MB/s after the release: the link's pace is a lower bound on any machine.
    assert paced > 1.0, paced

    assert stdout.decode() == "200"
    assert sha256_file(out) == expected
    server.wait_idle()


def test_curl_resume_completes_the_session(
    start_server: StartServer, demo_root: Path, tmp_path: Path
) -> None:
    curl = require_tool("curl")
    size = 5 * MIB
    expected = write_pattern_file(demo_root / "resumable.bin", size)
    server = start_server(env=ONE_SLOT)
    out = tmp_path / "resumable.bin"
    first_part = 2 * MIB

    subprocess.run(
        [curl, "-sS", "-r", f"0-{first_part - 1}", "-o", str(out), server.url("resumable.bin")],
        check=True,
        timeout=CLIENT_TIMEOUT,
    )
    assert out.stat().st_size == first_part
    # Half a file delivered: the session holds its slot, waiting for the rest.
    assert server.readiness()["active"] == 1
    assert server.metric("arkvory_download_completed_total") == 0

    result = subprocess.run(
        [curl, "-sS", "-C", "-", "-o", str(out), "-w", "%{http_code}", server.url("resumable.bin")],
        check=True,
        capture_output=True,
        timeout=CLIENT_TIMEOUT,
    )
    assert result.stdout.decode() == "206"
    assert sha256_file(out) == expected
    server.wait_idle()
    assert server.metric("arkvory_download_completed_total") == 1

    # A prefix saved by an earlier run (not fetched from this server): resuming from
    # the middle completes the download without the bytes before the offset (R-SESS-8).
    saved = 3 * MIB + 12345
    out.write_bytes(pattern_bytes(size, "resumable.bin")[:saved])
    result = subprocess.run(
        [curl, "-sS", "-C", "-", "-o", str(out), "-w", "%{http_code}", server.url("resumable.bin")],
        check=True,
        capture_output=True,
        timeout=CLIENT_TIMEOUT,
    )
    assert result.stdout.decode() == "206"
    assert sha256_file(out) == expected
    server.wait_idle()
    assert server.metric("arkvory_download_completed_total") == 2


def test_curl_retry_survives_a_full_queue(
    start_server: StartServer, demo_root: Path, tmp_path: Path
) -> None:
    curl = require_tool("curl")
    write_pattern_file(demo_root / "busy.bin", 2 * MIB)
    expected = write_pattern_file(demo_root / "wanted.bin", 3 * MIB)
    # A hold this short answers 503 almost at once: curl's own retry loop must cope.
    server = start_server(env={**ONE_SLOT, "ARKVORY_DOWNLOAD_HOLD_SECONDS": "0.2"})
    holder = SlotHolder(server, "busy.bin", "other-client")
    holder.take()

    out = tmp_path / "wanted.bin"
    process = subprocess.Popen(
        [
            curl,
            "--no-progress-meter",
            "--retry",
            "10",
            "--retry-all-errors",
            "--output",
            str(out),
            "--write-out",
            "%{http_code}",
            server.url("wanted.bin"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stderr is not None
    output, errors = StreamLines(process.stdout), StreamLines(process.stderr)
    try:
        # The slot frees only once curl has been turned away three times.
        wait_until(
            lambda: len(RETRY.findall(errors.text())) >= 3, SETTLE_SECONDS, "curl's third retry"
        )
        holder.finish()
        process.wait(CLIENT_TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    stdout, stderr = output.join(), errors.join()
    assert process.returncode == 0, stderr
    assert stdout == "200"
    # curl got 503 several times and waited what Retry-After said each time (1-2 s
    # for the head of the queue), not its own doubling back-off (1, 2, 4, ... s).
    waits = [int(s) for s in RETRY.findall(stderr)]
    assert len(waits) >= 3, stderr
    assert max(waits) <= 2, waits
    assert sha256_file(out) == expected
    server.wait_idle()


def test_wget_resumes_through_a_busy_queue(
    start_server: StartServer, demo_root: Path, tmp_path: Path
) -> None:
    wget = require_tool("wget")
    size = 4 * MIB
    write_pattern_file(demo_root / "busy.bin", 2 * MIB)
    expected = write_pattern_file(demo_root / "wanted.bin", size)
    server = start_server(env={**ONE_SLOT, "ARKVORY_DOWNLOAD_HOLD_SECONDS": "0.2"})
    holder = SlotHolder(server, "busy.bin", "other-client")
    holder.take()

    work = tmp_path / "wget"
    work.mkdir()
    (work / "wanted.bin").write_bytes(pattern_bytes(size, "wanted.bin")[: MIB + 7])
    process = subprocess.Popen(
        [
            wget,
            "-c",
            "--retry-on-http-error=503",
            "--tries=20",
            "--waitretry=1",
            server.url("wanted.bin"),
        ],
        cwd=work,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
    )
    assert process.stderr is not None
    errors = StreamLines(process.stderr)
    try:
        # The slot frees only once wget has been turned away.
        wait_until(lambda: "503" in errors.text(), SETTLE_SECONDS, "wget's first 503")
        holder.finish()
        process.wait(CLIENT_TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    log = errors.join()
    assert process.returncode == 0, log
    assert "503" in log  # queued at first …
    assert "206 Partial Content" in log  # … then resumed from the saved prefix
    assert sha256_file(work / "wanted.bin") == expected
    server.wait_idle()
    # Both sessions completed: the other client's, and wget's from its resume offset.
    assert server.metric("arkvory_download_completed_total") == 2
