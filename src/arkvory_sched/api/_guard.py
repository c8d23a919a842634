"""Who may do what, and which write requests are refused before their body is read.

Reads need an identity (``401`` without one); writes need an operator (``403`` for a
viewer). A write must also come from the page or tool of the operator, never from
another site that happens to hold their cookies (cross-site request forgery): browsers
send ``Sec-Fetch-Site``, and anything but ``same-origin`` or ``none`` (typed, a tool)
is refused. A client that sends no ``Sec-Fetch-Site`` (curl, scripts, older browsers)
must send the header :data:`REQUEST_HEADER`: a form on another site cannot add a
header, and a script on another site that tries needs a CORS preflight this API never
grants — so a cross-site post can never change settings. Writes are JSON only
(``415`` otherwise): a form's media types are exactly what is refused.
"""

from __future__ import annotations

from typing import Final

from starlette.requests import Request
from starlette.responses import Response

from ._body import is_json_media_type
from ._identity import Identity
from ._problems import problem

__all__ = ["REQUEST_HEADER", "refuse_read", "refuse_write"]

REQUEST_HEADER: Final = "Arkvory-Request"
"""Required on writes from clients that send no ``Sec-Fetch-Site`` (value ``1``)."""
_SAFE_SITES: Final = frozenset({"same-origin", "none"})


def refuse_read(identity: Identity | None, challenge: str) -> Response | None:
    """``401`` for a request the host did not recognise, else ``None``."""
    if identity is None:
        return problem(
            401,
            "unauthenticated",
            "Authentication required",
            "The operator API needs credentials the server recognises.",
            headers={"www-authenticate": challenge},
        )
    return None


def refuse_write(request: Request, identity: Identity | None, challenge: str) -> Response | None:
    """The refusal of a write before its body is read, or ``None`` to go on."""
    refused = refuse_read(identity, challenge)
    if refused is not None:
        return refused
    assert identity is not None
    site = request.headers.get("sec-fetch-site")
    if site is not None and site.strip().lower() not in _SAFE_SITES:
        return problem(
            403,
            "cross_site_request",
            "Cross-site request refused",
            f"Settings change only from this site's own pages or from tools "
            f"(Sec-Fetch-Site was {site.strip()[:40]!r}).",
        )
    if site is None and request.headers.get(REQUEST_HEADER, "").strip() != "1":
        return problem(
            403,
            "cross_site_request",
            "Cross-site request refused",
            f"A client that sends no Sec-Fetch-Site must send '{REQUEST_HEADER}: 1' with a "
            "change, which a form on another site cannot do.",
            missingHeader=REQUEST_HEADER,
        )
    if not identity.may_write:
        return problem(
            403,
            "forbidden",
            "Operators only",
            f"{identity.name} may read the settings but not change them (role viewer).",
        )
    if not is_json_media_type(request.headers.get("content-type")):
        return problem(
            415,
            "unsupported_media_type",
            "JSON only",
            "Send the settings record as 'Content-Type: application/json'.",
            headers={"accept": "application/json"},
        )
    return None
