"""Bearer tokens of the demo server: who is downloading.

A real artifact server has accounts, service accounts and shared links; the scheduler
only needs to know the principal and its kind, because the kind picks the default
class (R-CLASS-2). The demo maps each ``--token`` to one principal. A request without
credentials is a shared link: a principal of its own, ``anonymous-link``, never the
principal who issued the link. A token that is present but unknown is denied, so that
a typo shows up as ``401`` instead of silently downloading as an anonymous link.

The operator API has staff tokens of its own (``--operator-token``, ``--viewer-token``):
a download token never changes settings, and a staff token downloads nothing.

A browser cannot add an ``Authorization`` header to a link or a page it loads, so the
demo's login (``demo._login``) puts the token in the cookie :data:`TOKEN_COOKIE`.
A request without ``Authorization`` presents that cookie's token instead, judged
exactly like a bearer token: an unknown one is refused, never taken for an
anonymous link, so a stale cookie (the demo makes new random tokens at each start)
shows up as ``401`` rather than as a download under the wrong principal.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any, Final, TypeVar

from starlette.requests import Request, cookie_parser

from .._classes import PrincipalKind
from ..api import Identity, Role

__all__ = [
    "ANONYMOUS_LINK",
    "TOKEN_COOKIE",
    "Principal",
    "StaffMap",
    "TokenMap",
    "is_known_token",
    "parse_staff_token",
    "parse_token",
    "parse_tokens",
    "principal_for",
    "staff_for",
]

_T = TypeVar("_T")

Principal = tuple[str, PrincipalKind]
TokenMap = Mapping[str, Principal]

ANONYMOUS_LINK: Final[Principal] = ("anonymous-link", PrincipalKind.LINK)
"""Who a request without credentials is: a link, with the link's default class."""

TOKEN_COOKIE: Final = "arkvory_demo_token"
"""The cookie the demo's browser login sets: a token, presented when there is no
``Authorization`` header (HttpOnly, SameSite=Strict, Path=/)."""

_KINDS: Final = ", ".join(kind.value for kind in PrincipalKind)
# RFC 6750 b64token: the characters a bearer token may contain.
_TOKEN_CHARS: Final = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/="
)


def parse_token(value: str) -> tuple[str, Principal]:
    """Parse one ``TOKEN=PRINCIPAL:KIND`` option value.

    The token is split off at the first ``=`` and the kind at the last ``:``, so a
    principal may itself contain colons (``svc:ci:service``). Raises :class:`ValueError`
    naming the value when any part is missing or the kind is not one of
    ``person``, ``service``, ``link``.
    """
    token, equals, rest = value.partition("=")
    if not equals or not token:
        raise ValueError(f"invalid token {value!r}: expected TOKEN=PRINCIPAL:KIND")
    if not set(token) <= _TOKEN_CHARS:
        raise ValueError(
            f"invalid token {value!r}: a bearer token may only contain letters, digits and -._~+/="
        )
    principal, colon, kind_text = rest.rpartition(":")
    if not colon or not principal.strip():
        raise ValueError(f"invalid token {value!r}: expected TOKEN=PRINCIPAL:KIND")
    try:
        kind = PrincipalKind(kind_text.strip().lower())
    except ValueError:
        raise ValueError(
            f"invalid token {value!r}: unknown principal kind {kind_text!r}; "
            f"expected one of {_KINDS}"
        ) from None
    return token, (principal.strip(), kind)


def parse_tokens(values: Iterable[str]) -> dict[str, Principal]:
    """Parse every ``--token`` value; a token given twice is an error, not a silent override."""
    tokens: dict[str, Principal] = {}
    for value in values:
        token, principal = parse_token(value)
        if token in tokens:
            raise ValueError(f"invalid token {value!r}: this token is already defined")
        tokens[token] = principal
    return tokens


def principal_for(scope: MutableMapping[str, Any], tokens: TokenMap) -> Principal | None:
    """The principal of a request, or ``None`` when its credentials are refused.

    ``Bearer <token>`` with a known token → its principal. Without ``Authorization``,
    the :data:`TOKEN_COOKIE` cookie's token counts the same way; with neither →
    :data:`ANONYMOUS_LINK`. Anything else that is present — an unknown token (in the
    header or the cookie), another scheme, several ``Authorization`` headers — is
    refused.
    """
    headers = [(bytes(name).lower(), bytes(value)) for name, value in scope.get("headers", ())]
    values = [value for name, value in headers if name == b"authorization"]
    if not values:
        cookie = _cookie_token(b"; ".join(value for name, value in headers if name == b"cookie"))
        if cookie is None:
            return ANONYMOUS_LINK
        return _match(tokens, cookie)
    if len(values) > 1:
        return None
    presented = _bearer(values[0].decode("latin-1"))
    return None if presented is None else _match(tokens, presented)


def _bearer(authorization: str) -> bytes | None:
    """The credentials of ``Bearer <token>``, or ``None`` for any other form."""
    scheme, _, credentials = authorization.strip().partition(" ")
    presented = credentials.strip()
    if scheme.lower() != "bearer" or not presented:
        return None
    return presented.encode("latin-1", "replace")


def _cookie_token(cookie_header: bytes) -> bytes | None:
    """The token in the :data:`TOKEN_COOKIE` cookie, or ``None`` when there is none."""
    if not cookie_header:
        return None
    value = cookie_parser(cookie_header.decode("latin-1")).get(TOKEN_COOKIE, "")
    return value.encode("latin-1", "replace") if value else None


def _match(known: Mapping[str, _T], presented: bytes) -> _T | None:
    """What ``presented`` stands for among ``known`` tokens, or ``None``.

    Compared with every token in constant time, so response timing does not reveal
    how much of a guessed token was right.
    """
    found: _T | None = None
    for token, value in known.items():
        if hmac.compare_digest(token.encode("latin-1"), presented):
            found = value
    return found


# --- the operator API's staff ---------------------------------------------------------

StaffMap = Mapping[str, Identity]


def parse_staff_token(value: str, role: Role) -> tuple[str, Identity]:
    """Parse one ``TOKEN=NAME`` (or bare ``TOKEN``, named after the role) of the
    operator API's staff; raises :class:`ValueError` naming the value."""
    token, equals, name = value.partition("=")
    token = token.strip()
    if not token or not set(token) <= _TOKEN_CHARS:
        raise ValueError(
            f"invalid token {value!r}: expected TOKEN=NAME with a token of letters, digits "
            "and -._~+/="
        )
    name = name.strip() if equals else f"demo-{role}"
    if not name:
        raise ValueError(f"invalid token {value!r}: the name after '=' is empty")
    return token, Identity(role, name)


def staff_for(request: Request, staff: StaffMap) -> Identity | None:
    """Who a request to the operator API is: ``Bearer <token>`` of a staff token or,
    without ``Authorization``, the :data:`TOKEN_COOKIE` cookie of the browser login;
    else nobody (``401``). Compared in constant time, like the download tokens."""
    authorization = request.headers.get("authorization")
    if authorization is None:
        presented = _cookie_token(request.headers.get("cookie", "").encode("latin-1", "replace"))
    else:
        presented = _bearer(authorization)
    return None if presented is None else _match(staff, presented)


def is_known_token(token: str, tokens: TokenMap, staff: StaffMap) -> bool:
    """Whether ``token`` is one of the demo's download or staff tokens (the login
    refuses any other), compared in constant time against every one."""
    presented = token.encode("latin-1", "replace")
    return _match(tokens, presented) is not None or _match(staff, presented) is not None
