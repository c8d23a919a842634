"""Problem documents (RFC 9457) of the own-downloads page: the same shape as the
operator API's and the middleware's (``type``, ``title``, ``status``, ``detail``,
``reason``), so one client handles all three."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Final

from starlette.responses import Response

__all__ = ["problem"]

_TYPE_PREFIX: Final = "urn:arkvory:problem:"
_MEDIA_TYPE: Final = "application/problem+json"


def problem(
    status: int,
    reason: str,
    title: str,
    detail: str,
    *,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """The response for one refusal; never cached, never sniffed."""
    document = {
        "type": _TYPE_PREFIX + reason,
        "title": title,
        "status": status,
        "detail": detail,
        "reason": reason,
    }
    body = json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()
    response = Response(body, status_code=status, media_type=_MEDIA_TYPE)
    response.headers["cache-control"] = "no-store"
    response.headers["x-content-type-options"] = "nosniff"
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response
