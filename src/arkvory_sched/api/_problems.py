"""Problem documents (RFC 9457) of the operator API: one builder, every refusal.

Every error the API answers is ``application/problem+json`` with the same members as
the middleware's (``type``, ``title``, ``status``, ``detail``, ``reason``) plus what the
caller needs to act: the JSON pointers of the bad fields (``invalidParams``), the
current revision and who made it, the position of a JSON syntax error.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Final

from starlette.responses import Response

__all__ = ["PROBLEM_TYPE_PREFIX", "json_pointer", "problem"]

PROBLEM_TYPE_PREFIX: Final = "urn:arkvory:problem:"
_MEDIA_TYPE: Final = "application/problem+json"


def problem(
    status: int,
    reason: str,
    title: str,
    detail: str,
    *,
    headers: Mapping[str, str] | None = None,
    **extensions: object,
) -> Response:
    """The response for one refusal; ``reason`` is also the last part of ``type``."""
    document: dict[str, object] = {
        "type": PROBLEM_TYPE_PREFIX + reason,
        "title": title,
        "status": status,
        "detail": detail,
        "reason": reason,
    }
    document.update(extensions)
    body = json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()
    response = Response(body, status_code=status, media_type=_MEDIA_TYPE)
    response.headers["cache-control"] = "no-store"
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response


def json_pointer(path: str) -> str:
    """A settings error's field path (``classWindows/bulk/windows/0/zone``) as a JSON
    pointer into the request body (RFC 6901: ``~`` is written ``~0``)."""
    return "/" + path.replace("~", "~0")
