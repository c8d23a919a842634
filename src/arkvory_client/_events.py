"""What a download tells its caller: events, the state to checkpoint, the result.

Events are plain frozen values so a caller can print them, log them or compare them in
tests; they are delivered in order through ``on_event`` or an iterator (R-CLIENT-9).
A download's stream reads: ``Queued`` (zero or more times) · ``Started`` · ``Progress``
(repeated, with ``Retrying`` when a real failure interrupts) · ``Completed``; a
preempted download goes back to ``Queued`` and then ``Started`` again.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

__all__ = [
    "Completed",
    "DownloadResult",
    "DownloadState",
    "Event",
    "Progress",
    "Queued",
    "Retrying",
    "Started",
    "new_download_id",
]

_MAX_ID = 200


@dataclass(frozen=True, slots=True)
class Queued:
    """The server asked the client to come back later (``503``/``429``).

    ``position`` (1 is next) and the estimated start (``starts_at``, within
    ``earliest``..``latest``) come from the queue headers and are ``None`` when the server
    gave none (a plain busy answer, or a newcomer's first answer from a shared PostgreSQL
    queue, which tells the place from the first poll on). ``retry_after`` is the wait the
    server asked for, in seconds. ``reason`` is ``download_queued``, ``busy``,
    ``rate_limited`` or ``retry_after``. ``guessed``: the server had no link rate yet,
    configured or measured, so ``starts_at`` is a guess within a wide interval (ADR 0042).
    """

    position: int | None
    starts_at: datetime | None
    earliest: datetime | None
    latest: datetime | None
    retry_after: float
    download_class: str | None
    reason: str = "download_queued"
    guessed: bool = False


@dataclass(frozen=True, slots=True)
class Started:
    """Bytes begin to flow from ``offset`` (again, after a queue wait); ``size`` is the
    object's size when known."""

    offset: int
    size: int | None


@dataclass(frozen=True, slots=True)
class Progress:
    """``done`` bytes of ``size`` are saved; ``rate`` is bytes per second lately."""

    done: int
    size: int | None
    rate: float


@dataclass(frozen=True, slots=True)
class Completed:
    """The whole object is at ``path``, synced to disk, ``size`` bytes of version ``etag``."""

    size: int
    path: Path
    etag: str | None


@dataclass(frozen=True, slots=True)
class Retrying:
    """A real failure (``reason``) is retried after ``delay`` seconds; ``attempt`` is how
    many attempts of the current request have failed so far."""

    reason: str
    attempt: int
    delay: float


Event = Queued | Started | Progress | Completed | Retrying
"""Any event of a download."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DownloadState:
    """Everything needed to continue a download in a new process.

    Reported through ``on_state`` whenever it changes; the bytes it counts as ``done``
    are on disk before it is reported. Passing it back as ``state=`` resumes from
    ``done`` (validated by ``etag`` with ``If-Range``) and keeps the download's place in
    the server's queue (``download_id`` and the last ``ticket``, R-TICKET-1).
    """

    download_id: str
    etag: str | None = None
    size: int | None = None
    done: int = 0
    ticket: str | None = None

    def __post_init__(self) -> None:
        if not self.download_id or len(self.download_id) > _MAX_ID:
            raise ValueError(f"download_id must be 1 to {_MAX_ID} characters")
        if not (self.download_id.isascii() and self.download_id.isprintable()):
            raise ValueError("download_id must be printable ASCII")
        if self.done < 0 or (self.size is not None and not 0 <= self.done <= self.size):
            raise ValueError("done must be between 0 and size")


@dataclass(frozen=True, slots=True, kw_only=True)
class DownloadResult:
    """A finished download: where it is, what it is, and what it cost.

    ``failures`` counts real failures survived (busy answers are not failures).
    """

    path: Path
    size: int
    etag: str | None
    download_id: str
    failures: int
    waited: float
    """Seconds (a float, such as ``107.4``) spent waiting for the server between
    requests: the queue's ``Retry-After``, busy answers, back-off before a retry. The
    transfer itself is not counted, nor a wait for ``not_before``. It is the figure
    ``wait_limit`` is measured against, so the two share a unit."""


def new_download_id() -> str:
    """A fresh ``Arkvory-Download-Id``: 32 random hex digits (R-CLIENT-6)."""
    return uuid.uuid4().hex
