"""Reading a download request once: which range the app will serve, whether it will
answer 304 or 416 (no place then), and the client's scheduler fields.

Pure functions of the request and the :class:`DownloadTarget`; the middleware calls
:func:`read_request` once, before it asks the scheduler anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from .._exceptions import InvalidRequestError
from .._model import ByteRange
from .._target import DownloadTarget
from ._asgi import Scope
from ._conditional import etag_listed, http_date
from ._ranges import Unsatisfiable, first_range

__all__ = [
    "UNSATISFIABLE",
    "ClientRequest",
    "client_fields",
    "not_modified",
    "read_request",
    "request_headers",
    "requested_range",
]

# The request headers the middleware reads; every other header is skipped unread.
_WANTED = frozenset(
    {
        b"range",
        b"if-range",
        b"if-none-match",
        b"if-modified-since",
        b"arkvory-download-id",
        b"arkvory-download-class",
        b"arkvory-queue-ticket",
    }
)
_MAX_HEADER_VALUE = 512

UNSATISFIABLE = ByteRange(0, 1)  # sentinel identity, never sent to the scheduler


def requested_range(headers: Mapping[bytes, str], target: DownloadTarget) -> ByteRange | None:
    """The range the app will serve: the first of a Range header the app will honour."""
    header = headers.get(b"range")
    if header is None:
        return None
    holds = _if_range_holds(headers.get(b"if-range"), target.etag)
    if holds is False:
        return None  # the app will send the whole (changed) object
    found = first_range(header, target.size)
    if isinstance(found, Unsatisfiable):
        # A 416 takes no place, but only when the app cannot answer 200 with the whole.
        return UNSATISFIABLE if holds else None
    return found


def _if_range_holds(if_range: str | None, etag: str | None) -> bool | None:
    """Will the app honour the Range? ``None`` when only the app can tell (an HTTP-date,
    or no ETag known). Predicting a range the app then ignores is safe — its ``200`` is
    counted as the whole object — but counting an unknown ``206`` as whole is not."""
    if if_range is None:
        return True
    value = if_range.strip()
    if etag is None or not value.startswith(('"', "W/")):
        return None
    return value == etag and not value.startswith("W/")  # strong comparison only


def not_modified(headers: Mapping[bytes, str], target: DownloadTarget) -> bool:
    """Whether the app will answer 304 (RFC 9110 §13.2.2): such a request takes no place.

    ``If-None-Match`` decides when present; otherwise ``If-Modified-Since`` against the
    target's ``Last-Modified``.
    """
    if_none_match = headers.get(b"if-none-match")
    if if_none_match is not None:
        return target.etag is not None and etag_listed(if_none_match, target.etag, weak=True)
    if_modified_since = headers.get(b"if-modified-since")
    if if_modified_since is None or target.last_modified is None:
        return False
    since = http_date(if_modified_since)
    modified = http_date(target.last_modified)
    return since is not None and modified is not None and modified <= since


def request_headers(scope: Scope) -> dict[bytes, str] | None:
    """The few request headers the middleware reads, decoded once (the first of each).

    ``None`` when the request has none of them, as most downloads of small objects do:
    then nothing needs to be looked up or validated.
    """
    found: dict[bytes, str] | None = None
    for name, value in scope.get("headers", ()):
        # Servers pass bytes (copied only if one passes a bytearray, which is unhashable).
        key = (name if type(name) is bytes else bytes(name)).lower()
        if key in _WANTED:
            if found is None:
                found = {key: bytes(value).decode("latin-1")}
            elif key not in found:
                found[key] = bytes(value).decode("latin-1")
    return found


NO_FIELDS: tuple[None, None, None] = (None, None, None)


def client_fields(
    headers: Mapping[bytes, str] | None,
) -> tuple[str | None, str | None, str | None]:
    """The download id (stripped), requested class and ticket a client sent.

    Raises :class:`InvalidRequestError` for an id or class that is too long or not
    printable; a ticket that is too long is ignored (the download queues anew).
    """
    if headers is None:
        return NO_FIELDS
    download_id = headers.get(b"arkvory-download-id")
    requested = headers.get(b"arkvory-download-class")
    ticket = headers.get(b"arkvory-queue-ticket")
    for field, value in (("download_id", download_id), ("download_class", requested)):
        if value is not None and (len(value) > _MAX_HEADER_VALUE or not value.isprintable()):
            raise InvalidRequestError(field, f"{field} is too long or not printable")
    if ticket is not None and len(ticket) > _MAX_HEADER_VALUE:
        ticket = None
    return (download_id.strip() if download_id is not None else None), requested, ticket


class ClientRequest(NamedTuple):
    """What the middleware reads of one GET for the scheduler (a tuple: one per request)."""

    byte_range: ByteRange | None
    download_id: str | None
    requested_class: str | None
    ticket: str | None
    client_address: str


def read_request(scope: Scope, target: DownloadTarget) -> ClientRequest | None:
    """Read a download request once; ``None`` when the app answers without a place.

    ``None`` for a ``304`` (R-SESS-4) or a ``416``. Raises
    :class:`InvalidRequestError` for a malformed id or class, after those two: a
    request the app answers without a place is never refused for its fields.
    """
    client = scope.get("client")
    address = str(client[0]) if client else ""
    headers = request_headers(scope)
    if headers is None:
        return ClientRequest(None, None, None, None, address)  # most small downloads
    if not_modified(headers, target):
        return None
    byte_range = requested_range(headers, target)
    if byte_range is UNSATISFIABLE:
        return None
    download_id, requested, ticket = client_fields(headers)
    return ClientRequest(byte_range, download_id, requested, ticket, address)
