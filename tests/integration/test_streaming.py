"""Large bodies through the middleware: a ZIP read by ranges, and 256 MiB in flat memory.

Both use the default scheduler settings (the 16 MiB session threshold included): the
files are large enough to be download sessions in their own right.
"""

from __future__ import annotations

import hashlib
import io
import time
import zipfile
from pathlib import Path

import httpx
import pytest

from .conftest import MIB, DemoServer, StartServer, pattern_bytes, write_pattern_file

# --- ZIP over HTTP ranges -----------------------------------------------------------------


class HttpRangeFile(io.RawIOBase):
    """A read-only, seekable file over HTTP ``Range`` GETs, as remote-archive readers do.

    No ``Arkvory-Download-Id``: the third-party case, whose session is keyed by the
    client address. With ``readahead`` > 0 a miss fetches at least that many bytes from
    the position (clipped at the end of the file) and serves later reads from that one
    buffer; with 0 every ``read`` is one GET of exactly the bytes asked for.
    """

    def __init__(self, client: httpx.Client, url: str, *, readahead: int = MIB) -> None:
        super().__init__()
        self._client = client
        self._url = url
        self._readahead = readahead
        head = client.head(url)
        head.raise_for_status()
        self.size = int(head.headers["content-length"])
        self.etag = head.headers["etag"]
        self._position = 0
        self._buffer = b""
        self._buffer_start = 0
        self.requests: list[tuple[int, int]] = []

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self.size}[whence]
        if base + offset < 0:
            raise OSError(f"negative seek position {base + offset}")
        self._position = base + offset
        return self._position

    def read(self, size: int | None = -1) -> bytes:
        start = self._position
        end = self.size if size is None or size < 0 else min(self.size, start + size)
        if end <= start:
            return b""
        buffered_end = self._buffer_start + len(self._buffer)
        if not (self._buffer_start <= start and end <= buffered_end):
            fetch_end = min(self.size, max(end, start + self._readahead))
            self._buffer = self._fetch(start, fetch_end)
            self._buffer_start = start
        offset = start - self._buffer_start
        data = self._buffer[offset : offset + end - start]
        self._position = end
        return data

    def _fetch(self, start: int, end: int) -> bytes:
        response = self._client.get(
            self._url, headers={"Range": f"bytes={start}-{end - 1}", "If-Range": self.etag}
        )
        assert response.status_code == 206, (response.status_code, response.text[:200])
        assert response.headers["content-range"] == f"bytes {start}-{end - 1}/{self.size}"
        assert len(response.content) == end - start
        self.requests.append((start, end))
        return response.content


def _write_archive(path: Path) -> dict[str, str]:
    """Three stored 7 MiB members and a deflated text member (≥ 20 MiB in all);
    returns each member's SHA-256."""
    members = {
        f"payload/part-{index}.bin": pattern_bytes(7 * MIB, f"part-{index}") for index in range(3)
    }
    members["payload/notes.txt"] = b"".join(
        f"line {line:07d} of the release notes\n".encode() for line in range(60_000)
    )
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
            info.compress_type = (
                zipfile.ZIP_DEFLATED if name.endswith(".txt") else zipfile.ZIP_STORED
            )
            archive.writestr(info, data)
    return {name: hashlib.sha256(data).hexdigest() for name, data in members.items()}


def _completed(server: DemoServer) -> float:
    return server.metric("arkvory_download_completed_total")


def _read_archive_over_http(server: DemoServer, demo_root: Path, readahead: int) -> None:
    expected = _write_archive(demo_root / "bundle.zip")
    assert (demo_root / "bundle.zip").stat().st_size > 20 * MIB
    with httpx.Client(timeout=30.0) as client:
        remote = HttpRangeFile(client, server.url("bundle.zip"), readahead=readahead)
        with zipfile.ZipFile(remote) as archive:
            # zipfile read the end of the file first (EOCD, ZIP64 locator, central
            # directory). That tail read must not have ended the session: it holds its
            # slot for 5 s without responses (R-SESS-10), then waits paused, in its place.
            assert remote.requests, "zipfile read nothing"
            assert all(start > 0 for start, _ in remote.requests)
            assert _completed(server) == 0, "the tail read completed the session"
            readiness = server.readiness()
            kept = readiness["active"] + readiness["classes"]["release"]["paused"]
            assert kept == 1, readiness
            assert sorted(archive.namelist()) == sorted(expected)

            for index, info in enumerate(archive.infolist()):
                digest = hashlib.sha256()
                with archive.open(info) as member:
                    while chunk := member.read(MIB):
                        digest.update(chunk)
                assert digest.hexdigest() == expected[info.filename], info.filename
                if index < len(expected) - 1:
                    # Still reading: the same session holds its slot.
                    assert server.readiness()["active"] == 1
                    assert _completed(server) == 0

    # Every byte has now been delivered once in some range: the session completes.
    server.wait_idle()
    assert _completed(server) == 1


def test_zipfile_over_ranges_keeps_one_session(start_server: StartServer, demo_root: Path) -> None:
    server = start_server()
    _read_archive_over_http(server, demo_root, readahead=MIB)


def test_zipfile_with_exact_ranges_keeps_one_session(
    start_server: StartServer, demo_root: Path
) -> None:
    server = start_server()
    _read_archive_over_http(server, demo_root, readahead=0)


# --- 256 MiB in flat memory ---------------------------------------------------------------


def _rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc (Linux)")
def test_256_mib_streams_through_in_flat_memory(start_server: StartServer, demo_root: Path) -> None:
    size = 256 * MIB
    expected = write_pattern_file(demo_root / "huge.bin", size)
    warm_up = write_pattern_file(demo_root / "warm-up.bin", 4 * MIB)
    server = start_server()

    with httpx.Client(timeout=60.0) as client:
        # Warm the code paths (per-request and session admission, file serving) first.
        response = client.get(server.url("warm-up.bin"))
        assert hashlib.sha256(response.content).hexdigest() == warm_up
        response = client.get(server.url("huge.bin"), headers={"Range": "bytes=0-1048575"})
        assert response.status_code == 206
        time.sleep(0.3)
        baseline = _rss_bytes(server.pid)

        digest = hashlib.sha256()
        received = 0
        # The server's resident set once per MiB received: samples all along the
        # transfer however fast or slow it runs (a timer could miss a quick one).
        samples: list[int] = []
        # No id, as the warm-up: one session, which this download completes.
        with client.stream("GET", server.url("huge.bin")) as stream:
            assert stream.status_code == 200
            assert stream.headers["content-length"] == str(size)
            for chunk in stream.iter_bytes(MIB):
                digest.update(chunk)
                received += len(chunk)
                samples.append(_rss_bytes(server.pid))

    assert received == size
    assert digest.hexdigest() == expected
    assert len(samples) >= size // MIB
    growth = max(samples) - baseline
    assert growth < 64 * MIB, f"server RSS grew by {growth / MIB:.1f} MiB"
    server.wait_idle()
