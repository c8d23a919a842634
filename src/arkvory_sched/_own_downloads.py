"""What one principal sees of its own downloads (issue #19): read through the port.

:meth:`DownloadScheduler.downloads_of` returns an :class:`OwnDownloads`: the sessions of
one principal, each with what its own client would learn by polling (place, start
estimate and interval) and what it has received so far. It is the data behind a
person's "my downloads" page, so it carries the principal's own identifiers (object,
download id) and nothing of anybody else: no other principal, no session key, no
ticket. A ticket is a bearer credential for a place in the queue; the page has no use
for it and a leaked page must not hand one out.

Keeping it cheap is part of the contract: an implementation reads the principal's own
sessions (at most ``queue_per_principal`` of them, found through an index on the
principal) and answers for at most :data:`OWN_DOWNLOADS_LIMIT`, oldest first; each place
is found the way a poll finds it, never by counting the whole queue.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from ._classes import DownloadClass

__all__ = ["OWN_DOWNLOADS_LIMIT", "DownloadState", "OwnDownload", "OwnDownloads"]

OWN_DOWNLOADS_LIMIT: Final = 100
"""At most this many downloads are described in one answer (the oldest first); a
principal may hold thousands of sessions, and a page shows far fewer."""


class DownloadState(StrEnum):
    """Where a download is: waiting for a slot, holding one, or paused (its slot given
    back after a pause in its requests, its place kept for ten minutes, R-SESS-9)."""

    WAITING = "waiting"
    ACTIVE = "active"
    PAUSED = "paused"


@dataclass(frozen=True, slots=True)
class OwnDownload:
    """One download of the principal who asked.

    ``download_class`` is its base class (what it was admitted as, after any lowering
    by ``Arkvory-Download-Class``); ``queue_class`` is the class it waits in now, higher
    than the base class once it has aged (R-CLASS, aging).

    ``position`` is the place its client's next poll would be told (1 = next), and
    ``starts_at``/``starts_earliest``/``starts_latest`` the start estimate and its
    interval that poll would carry, in wall-clock epoch seconds; all four are ``None``
    unless the download waits. ``since`` is when it entered its state (wall time):
    when it started waiting, got its slot, or paused.

    ``bytes_delivered`` counts the bytes sent from the download's start (a resumed
    download starts at its saved prefix), those of its responses still running
    included (ADR 0033), ``bytes_remaining`` what is left to the last
    byte of the object; ``rate`` is bytes per second since it got its slot, ``None``
    unless it is active. ``download_id`` is the client's own ``Arkvory-Download-Id``
    (``None`` for a tool that sends none).

    ``starts_guessed`` is true when that start was estimated on a guess of the link's
    rate (nothing configured, nothing measured yet), as the poll's ``Queued.guessed``:
    then only the interval is worth reading, and a page that showed the point like any
    other would promise what a poll no longer does (ADR 0042). It is false for a
    download that does not wait. It defaults to false so that a store written before
    it still builds its values; the contract suite holds each store to setting it.
    """

    object_id: str
    download_id: str | None
    state: DownloadState
    download_class: DownloadClass
    queue_class: DownloadClass
    position: int | None
    starts_at: float | None
    starts_earliest: float | None
    starts_latest: float | None
    object_size: int
    bytes_delivered: int
    bytes_remaining: int
    rate: float | None
    since: float
    starts_guessed: bool = False


@dataclass(frozen=True, slots=True)
class OwnDownloads:
    """The downloads of ``principal`` at ``at`` (wall-clock epoch seconds).

    ``downloads`` are at most :data:`OWN_DOWNLOADS_LIMIT`, in arrival order; ``total``
    counts all of the principal's sessions, so a page can say how many it left out.
    """

    principal: str
    at: float
    downloads: tuple[OwnDownload, ...]
    total: int

    @property
    def truncated(self) -> bool:
        """Whether some of the principal's downloads were left out of ``downloads``."""
        return self.total > len(self.downloads)
