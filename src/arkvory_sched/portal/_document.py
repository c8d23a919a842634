"""A principal's own downloads as JSON: one :class:`OwnDownloads` arranged for the page.

Only values: the port already decided what a principal may see (its own sessions, no
key, no ticket). Wall times are RFC 3339 strings in UTC; ``startsInSeconds`` is the
same start as a duration from ``at``, so a page shows "in N min" without trusting the
browser's clock. ``startsGuessed`` says the start was told on a guess of the link's
rate, as the waiting answer's problem document does (ADR 0042): the page calls it a
first guess rather than an expected start. Each download lists the classes it could be
lowered to (``Arkvory-Download-Class``, R-CLASS-4): a client may only lower its class.
The advice carries the class weights in force, so the page can say what lowering a
class does: the waiting classes share the slots that free up by weight (R-STRAT-1), so
a lower class still moves, at a smaller share.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Final

from .._classes import DownloadClass
from .._own_downloads import OwnDownload, OwnDownloads

__all__ = ["CLASS_HEADER", "own_downloads_document", "rfc3339"]

CLASS_HEADER: Final = "Arkvory-Download-Class"


def own_downloads_document(
    mine: OwnDownloads, weights: Sequence[int] | None = None
) -> dict[str, object]:
    """The JSON document of ``GET /api`` (see ``docs/api.md``, "A person's own downloads").

    ``weights`` are the class weights in force, most urgent class first (the
    scheduler's ``settings.weights``); ``None`` leaves them out of the advice.
    """
    return {
        "principal": mine.principal,
        "at": rfc3339(mine.at),
        "total": mine.total,
        "shown": len(mine.downloads),
        "truncated": mine.truncated,
        "downloads": [_download(download, mine.at) for download in mine.downloads],
        "advice": {
            "classHeader": CLASS_HEADER,
            "classOption": "arkvoryctl download --class CLASS URL",
            "notAfterOption": "arkvoryctl download --not-after TIME URL",
            "classWeights": None
            if weights is None
            else {cls.value: weights[cls.rank] for cls in DownloadClass},
        },
    }


def _download(download: OwnDownload, at: float) -> dict[str, object]:
    size = download.object_size
    done = size - download.bytes_remaining
    return {
        "objectId": download.object_id,
        "downloadId": download.download_id,
        "state": download.state.value,
        "class": download.download_class.value,
        "queueClass": download.queue_class.value,
        "position": download.position,
        "startsAt": _time(download.starts_at),
        "startsGuessed": download.starts_guessed,
        "startsEarliest": _time(download.starts_earliest),
        "startsLatest": _time(download.starts_latest),
        "startsInSeconds": None
        if download.starts_at is None
        else round(max(0.0, download.starts_at - at), 1),
        "objectSize": size,
        "bytesDelivered": download.bytes_delivered,
        "bytesRemaining": download.bytes_remaining,
        "progress": round(done / size, 4) if size > 0 else 1.0,
        "rate": None if download.rate is None else round(download.rate, 1),
        "since": rfc3339(download.since),
        "lowerClasses": [
            cls.value for cls in DownloadClass if cls.rank > download.download_class.rank
        ],
    }


def _time(value: float | None) -> str | None:
    return None if value is None else rfc3339(value)


def rfc3339(epoch: float) -> str:
    """Wall-clock epoch seconds as an RFC 3339 UTC time to the millisecond."""
    moment = datetime.fromtimestamp(epoch, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
