"""HTTP answers the middleware writes itself: problem documents (RFC 9457) and the
queue headers (SPEC §16).

Kept apart from the middleware so the mapping from decisions to bytes on the wire is
one small, testable function per answer.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from .._model import Queued, Rejected, RejectReason

__all__ = [
    "PROBLEM_CONTENT_TYPE",
    "bad_request",
    "busy",
    "queue_headers",
    "queued",
    "rfc3339",
]

PROBLEM_CONTENT_TYPE = b"application/problem+json"
_TYPE_PREFIX = "urn:arkvory:problem:"

Answer = tuple[int, list[tuple[bytes, bytes]], bytes]


def rfc3339(epoch_seconds: float) -> str:
    """Wall-clock seconds as RFC 3339 UTC with whole seconds (what clients parse)."""
    moment = datetime.fromtimestamp(round(epoch_seconds), tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _problem(
    status: int,
    reason: str,
    title: str,
    detail: str,
    headers: list[tuple[bytes, bytes]],
    extensions: dict[str, object],
) -> Answer:
    document: dict[str, object] = {
        "type": _TYPE_PREFIX + reason,
        "title": title,
        "status": status,
        "detail": detail,
        "reason": reason,
    }
    document.update(extensions)
    body = json.dumps(document, separators=(",", ":")).encode()
    return (
        status,
        [
            (b"content-type", PROBLEM_CONTENT_TYPE),
            (b"content-length", str(len(body)).encode()),
            (b"cache-control", b"no-store"),
            *headers,
        ],
        body,
    )


def queue_headers(decision: Queued) -> list[tuple[bytes, bytes]]:
    """The headers of a waiting download's answer (SPEC §16), whatever its body."""
    starts_at = rfc3339(decision.starts_at)
    earliest = rfc3339(decision.starts_earliest)
    latest = rfc3339(decision.starts_latest)
    starts = f"{starts_at}; earliest={earliest}; latest={latest}"
    if decision.guessed:  # on a guess of the link's rate: the interval is the answer
        starts += "; basis=guess"
    headers = [
        (b"retry-after", str(decision.retry_after).encode()),
        (b"arkvory-starts-at", starts.encode()),
        (b"arkvory-download-class", decision.download_class.value.encode()),
    ]
    if decision.position is not None:
        headers.append((b"arkvory-queue-position", str(decision.position).encode()))
    if decision.ticket is not None:
        headers.append((b"arkvory-queue-ticket", decision.ticket.encode()))
    return headers


def queued(decision: Queued) -> Answer:
    """``503`` ``download_queued``: come back at ``Retry-After`` — not a failure (R-SESS-5)."""
    starts_at = rfc3339(decision.starts_at)
    earliest = rfc3339(decision.starts_earliest)
    latest = rfc3339(decision.starts_latest)
    headers = queue_headers(decision)
    place = "a place" if decision.position is None else f"place {decision.position}"
    return _problem(
        503,
        "download_queued",
        "Download queued",
        f"The download waits for a session slot ({place}); start expected at {starts_at}.",
        headers,
        {
            "position": decision.position,
            "startsAt": starts_at,
            "startsEarliest": earliest,
            "startsLatest": latest,
            "startsGuessed": decision.guessed,
            "retryAfter": decision.retry_after,
            "downloadClass": decision.download_class.value,
        },
    )


_BUSY_DETAIL = {
    RejectReason.QUEUE_FULL: "The download queue is full.",
    RejectReason.PRINCIPAL_LIMIT: "This principal has the most downloads it may queue.",
    RejectReason.REQUEST_QUEUE_FULL: "All transfer places are busy and the waiting room is full.",
    RejectReason.REQUEST_WAIT_EXPIRED: "No transfer place became free in time.",
    RejectReason.RANGES_PER_SESSION: "This download already has its most concurrent responses.",
    RejectReason.SHUTTING_DOWN: "The server is shutting down.",
    RejectReason.STORAGE_UNAVAILABLE: "The shared queue cannot be reached right now.",
}


def busy(decision: Rejected) -> Answer:
    """``503`` busy with an honest ``Retry-After`` (R-RES-1, R-HOLD-1)."""
    headers = [(b"retry-after", str(decision.retry_after).encode())]
    if decision.download_class is not None:
        headers.append((b"arkvory-download-class", decision.download_class.value.encode()))
    return _problem(
        503,
        "busy",
        "Server busy",
        _BUSY_DETAIL[decision.reason] + " Retry after the time given.",
        headers,
        {"busyReason": decision.reason.value, "retryAfter": decision.retry_after},
    )


def bad_request(field: str, message: str) -> Answer:
    """``400`` naming the field; the offending value is never echoed (it may hold CR/LF)."""
    return _problem(400, "invalid_request", "Invalid request", message, [], {"field": field})
