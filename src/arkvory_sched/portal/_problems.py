"""Problem documents (RFC 9457) of the own-downloads page: the operator API's builder
(:func:`arkvory_sched.api.problem`), so the members and the media type are the same for
the API, the page and the middleware and one client handles all three; the page's
answers are also never sniffed."""

from __future__ import annotations

from collections.abc import Mapping

from starlette.responses import Response

from ..api import problem as api_problem

__all__ = ["problem"]


def problem(
    status: int,
    reason: str,
    title: str,
    detail: str,
    *,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """The response for one refusal; never cached, never sniffed."""
    response = api_problem(status, reason, title, detail, headers=headers)
    response.headers["x-content-type-options"] = "nosniff"
    return response
