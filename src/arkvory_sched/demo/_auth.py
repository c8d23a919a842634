"""Bearer tokens of the demo server: who is downloading.

A real artifact server has accounts, service accounts and shared links; the scheduler
only needs to know the principal and its kind, because the kind picks the default
class (R-CLASS-2). The demo maps each ``--token`` to one principal. A request without
credentials is a shared link: a principal of its own, ``anonymous-link``, never the
principal who issued the link. A token that is present but unknown is denied, so that
a typo shows up as ``401`` instead of silently downloading as an anonymous link.

The operator API has staff tokens of its own (``--operator-token``, ``--viewer-token``):
a download token never changes settings, and a staff token downloads nothing.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any, Final

from starlette.requests import Request

from .._classes import PrincipalKind
from ..api import Identity, Role

__all__ = [
    "ANONYMOUS_LINK",
    "Principal",
    "StaffMap",
    "TokenMap",
    "parse_staff_token",
    "parse_token",
    "parse_tokens",
    "principal_for",
    "staff_for",
]

Principal = tuple[str, PrincipalKind]
TokenMap = Mapping[str, Principal]

ANONYMOUS_LINK: Final[Principal] = ("anonymous-link", PrincipalKind.LINK)
"""Who a request without ``Authorization`` is: a link, with the link's default class."""

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

    No ``Authorization`` header → :data:`ANONYMOUS_LINK`. ``Bearer <token>`` with a
    known token → its principal. Anything else that is present — an unknown token,
    another scheme, several ``Authorization`` headers — is refused.
    """
    values = [
        bytes(value)
        for name, value in scope.get("headers", ())
        if bytes(name).lower() == b"authorization"
    ]
    if not values:
        return ANONYMOUS_LINK
    if len(values) > 1:
        return None
    scheme, _, credentials = values[0].decode("latin-1").strip().partition(" ")
    presented = credentials.strip()
    if scheme.lower() != "bearer" or not presented:
        return None
    found: Principal | None = None
    encoded = presented.encode("latin-1")
    # Compare with every token in constant time, so response timing does not reveal
    # how much of a guessed token was right.
    for token, principal in tokens.items():
        if hmac.compare_digest(token.encode("latin-1"), encoded):
            found = principal
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
    """Who a request to the operator API is: ``Bearer <token>`` of a staff token, else
    nobody (``401``). Compared in constant time, like the download tokens."""
    scheme, _, credentials = request.headers.get("authorization", "").strip().partition(" ")
    presented = credentials.strip().encode("latin-1", "replace")
    if scheme.lower() != "bearer" or not presented:
        return None
    found: Identity | None = None
    for token, identity in staff.items():
        if hmac.compare_digest(token.encode("latin-1"), presented):
            found = identity
    return found
