"""A person's browser at a download: is the request a navigation, and which place is it?

A person who clicks a link to a large file while the queue is busy should see a page
that says where they stand, not a problem document (ADR 0035). Two things are read from
the request, once, and only for a session-sized download without
``Arkvory-Download-Id`` (a protocol client keeps its own id and never sees the page):

- **A navigation**: ``Sec-Fetch-Mode: navigate``, or, from a browser that sends no
  ``Sec-Fetch-*`` headers at all, an ``Accept`` that names ``text/html``. A request with
  ``Range`` never is one: a person's click sends none, a download manager resuming does.
- **A place**: the ``arkvory-place`` cookie, ``<place id>[.<ticket>]``. The place id
  stands in for the client address in the session key (R-SESS-2), so a refresh, a
  reopened tab or a new address of the same browser finds the same waiting session; the
  ticket brings the arrival back if the session was dropped meanwhile (R-TICKET-1).

A navigation without the cookie gets the place id its address maps to under a key of
the process (an HMAC): a browser that refuses cookies still keeps its place as long as
its address stays, as every client without an id does, and a place id cannot be
derived by anyone who does not hold the key. The id never moves a download: a session
key holds the principal and the object, and a ticket is checked by the scheduler
against the key it was issued for, so a foreign, edited or stale cookie only starts a
new place at the end of the queue.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from typing import Final
from urllib.parse import quote, unquote

from .._tickets import TICKET_MAX_AGE_MS, TICKET_MAX_LENGTH
from ._asgi import Scope

__all__ = [
    "KEEP_SECONDS",
    "PLACE_COOKIE",
    "PlaceIds",
    "Visit",
    "accepts_html",
    "browser_path",
    "is_navigation",
    "read_visit",
]

PLACE_COOKIE: Final = "arkvory-place"
#: How long a place outlives its last page: a ticket's validity (R-TICKET-2).
KEEP_SECONDS: Final = TICKET_MAX_AGE_MS // 1000
_IDENTITY_PREFIX: Final = "browser-place:"  # never a client address (those are IPs)
_PLACE_ID: Final = re.compile(r"[A-Za-z0-9_-]{22}")
_TICKET: Final = re.compile(rf"[0-9A-Za-z._-]{{1,{TICKET_MAX_LENGTH}}}")
# The characters a browser sends unescaped in a path, so that a path rebuilt from the
# decoded one matches what the browser asks for (the WHATWG URL path set aside).
_PATH_SAFE: Final = "/!$&'()*+,;=:@-._~%"
_WANTED: Final = frozenset(
    {b"accept", b"cookie", b"range", b"sec-fetch-mode", b"sec-fetch-dest", b"sec-fetch-site",
     b"sec-fetch-user"}
)  # fmt: skip


class PlaceIds:
    """The place id of a browser that brings none: an HMAC of its address under a key of
    this process (one key per middleware, made at start)."""

    __slots__ = ("_key",)

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key if key is not None else secrets.token_bytes(32)

    def for_address(self, address: str) -> str:
        digest = hmac.new(self._key, address.encode("utf-8", "surrogatepass"), hashlib.sha256)
        return base64.urlsafe_b64encode(digest.digest()[:16]).decode("ascii").rstrip("=")


@dataclass(frozen=True, slots=True)
class Visit:
    """A browser's request for a session-sized download.

    ``navigation``: the person's tab waits for this answer (show the page).
    ``place_id``: the browser's place, ``None`` when no cookie can be scoped to the
    object's path (the address then keys the session, as without a page).
    ``ticket``: the ticket the cookie carried. ``cookie_path``: the object's path as
    the browser asks for it, the cookie's ``Path``. ``secure``: the request came over
    HTTPS, so the cookie is ``Secure``.
    """

    navigation: bool
    place_id: str | None
    ticket: str | None
    cookie_path: str | None
    secure: bool

    @property
    def identity(self) -> str | None:
        """What the session key holds in place of the client address (R-SESS-2)."""
        return None if self.place_id is None else _IDENTITY_PREFIX + self.place_id

    def cookie(self, ticket: str | None) -> tuple[bytes, bytes] | None:
        """``Set-Cookie`` for this place with ``ticket`` (none: the place id alone)."""
        if self.place_id is None or self.cookie_path is None:
            return None
        value = self.place_id if ticket is None else f"{self.place_id}.{ticket}"
        parts = [
            f"{PLACE_COOKIE}={value}",
            f"Path={self.cookie_path}",
            f"Max-Age={KEEP_SECONDS}",
            "HttpOnly",
            "SameSite=Lax",
        ]
        if self.secure:
            parts.append("Secure")
        return (b"set-cookie", "; ".join(parts).encode("latin-1"))


def read_visit(scope: Scope, address: str, ids: PlaceIds) -> Visit | None:
    """The browser visit a request is, or ``None``: neither a navigation nor a place.

    A cookie that does not parse is no cookie. Called only for requests without a
    download id (the caller's rule), so a protocol client is never read here.
    """
    headers: dict[bytes, list[str]] = {}
    for name, value in scope.get("headers", ()):
        key = bytes(name).lower()
        if key in _WANTED:
            headers.setdefault(key, []).append(bytes(value).decode("latin-1"))
    place = _place_cookie(headers.get(b"cookie", ()))
    navigation = is_navigation(
        mode=_first(headers, b"sec-fetch-mode"),
        fetch_metadata=any(name.startswith(b"sec-fetch-") for name in headers),
        accept=", ".join(headers.get(b"accept", ())) or None,
        ranged=b"range" in headers,
    )
    if place is None and not navigation:
        return None
    path = browser_path(scope)
    secure = scope.get("scheme") == "https"
    if path is None:
        return Visit(navigation, None, None, None, secure)
    if place is None:
        return Visit(navigation, ids.for_address(address), None, path, secure)
    place_id, ticket = place
    return Visit(navigation, place_id, ticket, path, secure)


def is_navigation(*, mode: str | None, fetch_metadata: bool, accept: str | None,
                  ranged: bool) -> bool:  # fmt: skip
    """Whether a person's tab waits for this answer (see the module docstring)."""
    if ranged:
        return False
    if fetch_metadata:
        return mode is not None and mode.strip().lower() == "navigate"
    return accept is not None and accepts_html(accept)


def accepts_html(accept: str) -> bool:
    """Whether an ``Accept`` value names ``text/html`` with a quality above zero."""
    for item in accept.split(","):
        media, *parameters = item.split(";")
        if media.strip().lower() != "text/html":
            continue
        quality = 1.0
        for parameter in parameters:
            name, _, value = parameter.partition("=")
            if name.strip().lower() == "q":
                try:
                    quality = float(value.strip())
                except ValueError:
                    quality = 0.0
        if quality > 0:
            return True
    return False


def browser_path(scope: Scope) -> str | None:
    """The object's path as the browser sent it: the cookie's ``Path``.

    ``raw_path`` is what the server received; a prefix a proxy removed (``root_path``
    given to the server) is put back from the decoded ``path``, which a server includes
    it in. ``None`` when the path cannot be a cookie attribute (a ``;``, a control or
    non-ASCII character).
    """
    path = str(scope.get("path", ""))
    raw = scope.get("raw_path")
    if raw:
        sent = bytes(raw).decode("latin-1")
        decoded = unquote(sent, errors="surrogateescape")
        if path.endswith(decoded) and len(path) > len(decoded):
            sent = quote(path[: len(path) - len(decoded)], safe=_PATH_SAFE) + sent
        elif path != decoded:
            sent = quote(path, safe=_PATH_SAFE)
    else:
        sent = quote(path, safe=_PATH_SAFE)
    if not sent.startswith("/") or ";" in sent or not sent.isascii() or not sent.isprintable():
        return None
    return sent


def _place_cookie(values: list[str] | tuple[()]) -> tuple[str, str | None] | None:
    """``(place id, ticket or None)`` from the first ``arkvory-place`` cookie that parses."""
    for header in values:
        for pair in header.split(";"):
            name, _, value = pair.strip().partition("=")
            if name != PLACE_COOKIE:
                continue
            place_id, dot, ticket = value.strip().strip('"').partition(".")
            if not _PLACE_ID.fullmatch(place_id):
                continue
            # A ticket that cannot be one is dropped; the place id still finds a session
            # that waits (the scheduler ignores a wrong ticket the same way).
            return place_id, ticket if dot and _TICKET.fullmatch(ticket) else None
    return None


def _first(headers: dict[bytes, list[str]], name: bytes) -> str | None:
    values = headers.get(name)
    return values[0] if values else None
