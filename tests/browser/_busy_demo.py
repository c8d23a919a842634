"""A demo server with a busy queue for the page tests: real clients, real downloads.

:class:`BusyDemo` starts ``arkvory_sched.demo serve`` (as :class:`DemoServer` does for
the integration suite) with few session slots and a small link bandwidth, and runs
downloads as real SDK clients in threads (:class:`arkvory_client.Client`): each one
polls when the server's ``Retry-After`` says, as any client would, so the sessions stay
in the queue and move through it on their own. :meth:`BusyDemo.download` starts one and
waits until the server counts it, so the arrival order is the order of the calls.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import pytest

from arkvory_client import Client, DownloadCancelledError, Progress
from tests.integration.conftest import MIB, DemoServer, write_pattern_file

__all__ = ["MIB", "TOKENS", "BusyDemo", "Downloader", "token_of"]

PEOPLE: Final = ("alice", "bob", "carol", "dave", "erin", "frank", "grace")
STOP_CLIENTS_SECONDS: Final = 2.0
ANSWER_SECONDS: Final = 30.0  # a loaded machine (the full suite on two cores) is slow
TOKENS: Final[Mapping[str, str]] = {name: f"{name}-token" for name in PEOPLE}


def token_of(name: str) -> str:
    return TOKENS[name]


@dataclass
class Downloader:
    """One download by one principal, in a thread of its own.

    A *gated* download stops at its first bytes (``holding``), still holding its slot
    (its later ranges are not asked for), until :meth:`release`.
    """

    principal: str
    object_id: str
    download_id: str
    thread: threading.Thread
    gate: threading.Event | None = None
    holding: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None
    finished: bool = False

    @property
    def held(self) -> bool:
        """Stopped at the gate, with a slot, and not released yet."""
        return self.gate is not None and self.holding.is_set() and not self.gate.is_set()

    def release(self) -> None:
        assert self.gate is not None, "not a gated download"
        self.gate.set()


class BusyDemo:
    """The demo server and the downloads running against it; :meth:`stop` ends both.

    ``range_size`` is the clients' range: the server counts a range as delivered when it
    ends, so smaller ranges show progress sooner on a slow link.
    """

    def __init__(
        self,
        root: Path,
        log: Path,
        *,
        sessions: int,
        bandwidth: int,
        files: Mapping[str, int],
        env: Mapping[str, str] | None = None,
        range_size: int = 8 * MIB,
    ) -> None:
        self._range_size = range_size
        for name, size in files.items():
            write_pattern_file(root / name, size)
        settings = {
            "ARKVORY_MAX_DOWNLOAD_SESSIONS": str(sessions),
            "ARKVORY_DOWNLOAD_RESERVE": "0",
            "ARKVORY_DOWNLOAD_SESSION_MIN_BYTES": "1MiB",
            "ARKVORY_DOWNLOAD_PREEMPT": "false",
            "ARKVORY_MAX_DOWNLOADS_PER_PRINCIPAL": "2",
        }
        settings.update(env or {})
        self.server = DemoServer(
            root,
            log,
            env=settings,
            bandwidth=bandwidth,
            tokens=[f"{token}={name}:person" for name, token in TOKENS.items()],
        )
        self._saved = root.parent / f"{root.name}-saved"
        self._saved.mkdir(exist_ok=True)
        self._stop = threading.Event()
        self.downloads: list[Downloader] = []

    @property
    def base_url(self) -> str:
        return self.server.base_url

    def start(self) -> None:
        self.server.start()

    def stop(self) -> None:
        """Stop the clients, then the server at once: a test server need not drain its
        slow downloads (SIGKILL). A client notices its cancel between chunks or sleep
        steps; one still asleep after :data:`STOP_CLIENTS_SECONDS` is a daemon thread
        that ends at its next step."""
        self._stop.set()
        for download in self.downloads:
            if download.gate is not None:
                download.gate.set()
        deadline = time.monotonic() + STOP_CLIENTS_SECONDS
        for download in self.downloads:
            download.thread.join(max(0.0, deadline - time.monotonic()))
        os.kill(self.server.pid, signal.SIGKILL)
        self.server.stop()

    def download(
        self, principal: str, object_id: str, *, download_id: str, gated: bool = False
    ) -> Downloader:
        """Start ``principal``'s download of ``object_id`` and wait until the server has
        answered its first request (queued or started): its session exists from then
        on, so the next call's session arrives after it. A ``gated`` download stops at
        its first bytes until released (see :class:`Downloader`); its file must be
        larger than ``range_size``, so that one range cannot complete it."""
        answered = threading.Event()
        holder: list[Downloader] = []

        def run() -> None:
            record = holder[0]
            headers = {"Authorization": f"Bearer {token_of(principal)}"}
            try:
                with Client(headers=headers, chunk_size=self._range_size) as client:
                    for event in client.iter_download(
                        self.server.url(object_id),
                        self._saved / f"{principal}-{download_id}",
                        download_id=download_id,
                        cancelled=self._stop.is_set,
                    ):
                        answered.set()
                        if record.gate is not None and isinstance(event, Progress):
                            record.holding.set()
                            record.gate.wait()
                record.finished = True
            except DownloadCancelledError:
                pass
            except BaseException as error:
                record.error = error
            finally:
                answered.set()

        thread = threading.Thread(target=run, name=f"{principal}-{object_id}", daemon=True)
        gate = threading.Event() if gated else None
        record = Downloader(principal, object_id, download_id, thread, gate)
        holder.append(record)
        self.downloads.append(record)
        thread.start()
        if not answered.wait(ANSWER_SECONDS):
            pytest.fail(f"{principal}'s download of {object_id}: no answer in {ANSWER_SECONDS} s")
        return record

    def downloads_of(self, principal: str) -> Sequence[Downloader]:
        return [download for download in self.downloads if download.principal == principal]

    def errors(self) -> list[str]:
        return [
            f"{download.principal} {download.object_id}: {download.error!r}"
            for download in self.downloads
            if download.error is not None
        ]
