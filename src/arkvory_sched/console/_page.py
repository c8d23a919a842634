"""The operator page as an ASGI app: one HTML document and its static files (R-VIS-2).

The page is the operator API's own client (ADR 0024): HTML, CSS and plain JavaScript
modules shipped as package data (:mod:`arkvory_sched.console.static`), read once at
construction and served from memory. There is no build step and no template engine;
the HTML has four placeholders, filled with escaped values per request:

* ``{{static}}`` — where the static files are, under the mount;
* ``{{api}}`` — the operator API's URL (the page reads and writes only through it);
* ``{{role}}``, ``{{name}}`` — who the host says the caller is, so a viewer's page
  comes up read-only. The API enforces the role anyway; the page only avoids offering
  controls that would be refused.

The page admits exactly whom the API admits: it asks the same ``authorize`` callable
and refuses with the API's own ``401`` problem document. A viewer gets the page,
read-only. The HTML is ``no-store`` (it names the caller) under a Content-Security-
Policy that allows scripts, styles and connections to this origin only, and no inline
script at all, so an injected string can never run. The static files are the same for
everyone and carry no secret; they are served to anyone, revalidated by ``ETag``.
"""

from __future__ import annotations

import hashlib
import html
from dataclasses import dataclass
from importlib import resources
from typing import Final

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, Router
from starlette.types import Receive, Scope, Send

from ..api import API_PREFIX, DEFAULT_CHALLENGE, Authorize, identify, refuse_read

__all__ = ["CONTENT_SECURITY_POLICY", "DEFAULT_POLL_SECONDS", "OperatorPage", "operator_page"]

CONTENT_SECURITY_POLICY: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
DEFAULT_POLL_SECONDS: Final = 3.0
_MIN_POLL_SECONDS: Final = 2.0
_MAX_POLL_SECONDS: Final = 5.0
_PAGE: Final = "operator.html"
_STATIC_PACKAGE: Final = "arkvory_sched.console.static"
_MEDIA_TYPES: Final = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".ico": "image/x-icon",
}
_COMMON_HEADERS: Final = {
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
}


@dataclass(frozen=True, slots=True)
class _Asset:
    body: bytes
    media_type: str
    etag: str


def operator_page(
    *,
    authorize: Authorize,
    api_url: str = API_PREFIX,
    poll_seconds: float = DEFAULT_POLL_SECONDS,
    challenge: str = DEFAULT_CHALLENGE,
) -> OperatorPage:
    """The page for one host; keyword-only, and ``authorize`` has no default, as for
    :func:`arkvory_sched.api.operator_api` (see :class:`OperatorPage`)."""
    return OperatorPage(
        authorize=authorize, api_url=api_url, poll_seconds=poll_seconds, challenge=challenge
    )


class OperatorPage:
    """The operator page; mount it where operators find it (the demo: ``/admin/downloads``).

    ``authorize`` is the host's callable the API uses; ``api_url`` is where the host
    mounted the API (an absolute path on the same origin: the page's policy allows no
    other); ``poll_seconds`` (2–5) is how often the page reads the queue while visible.
    """

    def __init__(
        self,
        *,
        authorize: Authorize,
        api_url: str = API_PREFIX,
        poll_seconds: float = DEFAULT_POLL_SECONDS,
        challenge: str = DEFAULT_CHALLENGE,
    ) -> None:
        if not callable(authorize):
            raise TypeError("authorize must be a callable: request -> Identity | None")
        if not api_url.startswith("/") or api_url.startswith("//"):
            raise ValueError("api_url must be a path on this origin, such as /api/v1/…")
        if not _MIN_POLL_SECONDS <= poll_seconds <= _MAX_POLL_SECONDS:
            raise ValueError(
                f"poll_seconds must be from {_MIN_POLL_SECONDS:g} to {_MAX_POLL_SECONDS:g}"
            )
        self._authorize = authorize
        self._api_url = api_url.rstrip("/")
        self._poll_ms = round(poll_seconds * 1000)
        self._challenge = challenge
        self._template, self._assets = _load_static()
        self._router = Router(
            routes=[
                Route("/", self._page, methods=["GET", "HEAD"]),
                Route("/static/{name}", self._static, methods=["GET", "HEAD"]),
            ]
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._router(scope, receive, send)

    async def _page(self, request: Request) -> Response:
        identity = await identify(self._authorize, request)
        refused = refuse_read(identity, self._challenge)
        if refused is not None:
            return refused
        assert identity is not None
        base = request.scope.get("root_path", "").rstrip("/")
        values = {
            "static": f"{base}/static",
            "api": self._api_url,
            "role": identity.role,
            "name": identity.name,
            "poll": str(self._poll_ms),
        }
        page = self._template
        for key, value in values.items():
            page = page.replace("{{" + key + "}}", html.escape(value, quote=True))
        response = Response(page, media_type="text/html; charset=utf-8")
        response.headers["cache-control"] = "no-store"
        response.headers["content-security-policy"] = CONTENT_SECURITY_POLICY
        response.headers["x-frame-options"] = "DENY"
        response.headers.update(_COMMON_HEADERS)
        return response

    async def _static(self, request: Request) -> Response:
        asset = self._assets.get(request.path_params["name"])
        if asset is None:
            return Response("not found", status_code=404, media_type="text/plain")
        headers = {"etag": asset.etag, "cache-control": "no-cache", **_COMMON_HEADERS}
        if request.headers.get("if-none-match") == asset.etag:
            return Response(status_code=304, headers=headers)
        return Response(asset.body, media_type=asset.media_type, headers=headers)


def _load_static() -> tuple[str, dict[str, _Asset]]:
    """The HTML template and every served file of the static package, read once."""
    folder = resources.files(_STATIC_PACKAGE)
    template = folder.joinpath(_PAGE).read_text(encoding="utf-8")
    assets: dict[str, _Asset] = {}
    for entry in folder.iterdir():
        suffix = "." + entry.name.rpartition(".")[2]
        if not entry.is_file() or suffix not in _MEDIA_TYPES:
            continue
        body = entry.read_bytes()
        digest = hashlib.sha256(body).hexdigest()[:16]
        assets[entry.name] = _Asset(body, _MEDIA_TYPES[suffix], f'"{digest}"')
    return template, assets
