"""The request the download sends next, and the queue ticket it echoes (R-CLIENT-6).

Every request carries ``Range`` (``chunk_size`` bytes from the first byte not yet
saved), the client-generated ``Arkvory-Download-Id``, the last ``Arkvory-Queue-Ticket``
received and the optional ``Arkvory-Download-Class``, so the server can tell one
download's requests from another's and keep its place in the queue. After the first
byte, a strong ``ETag`` goes out as ``If-Range`` so that another version of the object
comes back whole instead of as a range to splice onto the old bytes (R-CLIENT-8).
"""

from __future__ import annotations

from typing import Final

from ._range_answers import Saved
from ._steps import Request

__all__ = [
    "DOWNLOAD_CLASS_HEADER",
    "DOWNLOAD_ID_HEADER",
    "TICKET_HEADER",
    "accepted_ticket",
    "is_strong",
    "range_request",
]

DOWNLOAD_ID_HEADER: Final = "Arkvory-Download-Id"
DOWNLOAD_CLASS_HEADER: Final = "Arkvory-Download-Class"
TICKET_HEADER: Final = "Arkvory-Queue-Ticket"
_MAX_TICKET: Final = 512


def is_strong(etag: str | None) -> bool:
    """A weak tag never matches ``If-Range`` (RFC 9110 §13.1.5): only strong ones go out."""
    return etag is not None and etag.startswith('"')


def range_request(
    url: str,
    saved: Saved,
    *,
    chunk_size: int,
    download_id: str,
    ticket: str | None,
    download_class: str | None,
) -> Request:
    """The GET for the next ``chunk_size`` bytes after the ``saved.done`` already saved."""
    first = saved.done
    last = first + chunk_size - 1
    if saved.size is not None:
        last = min(last, saved.size - 1)
    headers = [
        ("Range", f"bytes={first}-{last}"),
        ("Accept-Encoding", "identity"),
        (DOWNLOAD_ID_HEADER, download_id),
    ]
    if first > 0 and is_strong(saved.etag):
        assert saved.etag is not None
        headers.append(("If-Range", saved.etag))
    if ticket is not None:
        headers.append((TICKET_HEADER, ticket))
    if download_class is not None:
        headers.append((DOWNLOAD_CLASS_HEADER, download_class))
    return Request("GET", url, tuple(headers), first)


def accepted_ticket(value: str | None) -> str | None:
    """The queue ticket of an answer to echo from now on; ``None`` keeps the last one.

    A ticket is opaque, but one too long or not printable ASCII could not go back out as
    a header, so it is ignored rather than breaking every later request.
    """
    if value and len(value) <= _MAX_TICKET and value.isascii() and value.isprintable():
        return value.strip()
    return None
