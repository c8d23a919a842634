"""A person's own downloads as an ASGI app: the JSON and the page that polls it.

Mount :func:`own_downloads_app` wherever the host wants the page (the demo uses
``/downloads/mine``). Identity comes from the host, as for the operator API: an
``identify`` callable says which principal a request is, or ``None`` (``401``). There
is no default, so the page is never shown to whoever a host forgot to check.

Routes, relative to the mount:

* ``GET /api``: the principal's downloads as JSON (:func:`own_downloads_document`);
* ``GET /``: the page, static HTML that loads its script and style below;
* ``GET /static/own-downloads.js`` and ``.css``: the page's own files, package data;
* ``GET /static/favicon.svg``: the project's icon (:func:`arkvory_sched.console.favicon`).

The page asks ``identify`` too: it holds nothing personal (the script fetches that),
but a page that answers for a visitor who has no downloads to see would only
mislead. Every answer carries ``Cache-Control: no-store`` (a shared cache must never
keep one person's list for another) and ``X-Content-Type-Options: nosniff``; the page
a Content-Security-Policy that allows only its own script and style, so no injected
markup can run or load anything.
"""

from __future__ import annotations

import html
import inspect
from collections.abc import Awaitable, Callable
from functools import cache
from importlib import resources
from typing import Final

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, Router
from starlette.types import Receive, Scope, Send

from .._exceptions import StoreUnavailableError
from .._port import DownloadScheduler
from ..console import FAVICON_SVG, favicon
from ._document import own_downloads_document
from ._problems import problem

__all__ = [
    "CONTENT_SECURITY_POLICY",
    "DEFAULT_CHALLENGE",
    "Identify",
    "OwnDownloadsApp",
    "own_downloads_app",
]

Identify = Callable[[Request], str | Awaitable[str | None] | None]
"""The host's answer to "whose downloads?": a principal's name, or ``None`` for a
request it does not accept (sync or async)."""

DEFAULT_CHALLENGE: Final = 'Bearer realm="arkvory-sched"'

CONTENT_SECURITY_POLICY: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

_STATIC: Final = {
    "own-downloads.js": "text/javascript; charset=utf-8",
    "own-downloads.css": "text/css; charset=utf-8",
}
_READ: Final = ("GET", "HEAD")


def own_downloads_app(
    *,
    scheduler: DownloadScheduler,
    identify: Identify,
    challenge: str = DEFAULT_CHALLENGE,
) -> OwnDownloadsApp:
    """The page and its JSON for one process; keyword-only, ``identify`` has no default
    (see :class:`OwnDownloadsApp`)."""
    return OwnDownloadsApp(scheduler=scheduler, identify=identify, challenge=challenge)


class OwnDownloadsApp:
    """A person's own downloads (issue #19) as an ASGI app.

    ``identify`` is the host's ``request -> principal | None``; ``challenge`` is the
    ``WWW-Authenticate`` header of a ``401``. The answer for a principal is
    :meth:`DownloadScheduler.downloads_of`: its own sessions only, so nothing another
    principal owns (name, object, download id, key, ticket) can reach the page.
    """

    def __init__(
        self,
        *,
        scheduler: DownloadScheduler,
        identify: Identify,
        challenge: str = DEFAULT_CHALLENGE,
    ) -> None:
        if not callable(identify):
            raise TypeError("identify must be a callable: request -> principal name | None")
        self._scheduler = scheduler
        self._identify = identify
        self._challenge = challenge
        self._router = Router(
            routes=[
                Route("/", self._page, methods=_READ),
                Route("/api", self._api, methods=_READ),
                Route("/static/{name}", self._static, methods=_READ),
            ],
            default=self._not_found,
            redirect_slashes=False,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("path", "").rstrip("/") == scope.get(
            "root_path", ""
        ).rstrip("/"):
            # Mounted without a trailing slash (``/downloads/mine``): the page itself.
            scope = {**scope, "path": scope.get("root_path", "").rstrip("/") + "/"}
        await self._router(scope, receive, send)

    # ------------------------------------------------------------------ routes
    async def _page(self, request: Request) -> Response:
        refused = await self._refusal(request)
        if refused is not None:
            return refused
        base = html.escape(request.scope.get("root_path", "").rstrip("/"), quote=True)
        body = _page_template().replace("{{base}}", base)
        response = Response(body, media_type="text/html; charset=utf-8")
        response.headers["content-security-policy"] = CONTENT_SECURITY_POLICY
        response.headers["referrer-policy"] = "no-referrer"
        return _private(response)

    async def _api(self, request: Request) -> Response:
        principal = await self._principal(request)
        if principal is None:
            return self._unauthenticated()
        try:
            mine = await self._scheduler.downloads_of(principal)
        except StoreUnavailableError as error:
            return problem(
                503,
                "storage_unavailable",
                "Downloads cannot be read",
                f"The download queue cannot be read right now: {error}",
                headers={"retry-after": "10"},
            )
        weights = self._scheduler.settings.weights
        return _private(JSONResponse(own_downloads_document(mine, weights)))

    async def _static(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name == FAVICON_SVG:
            body, icon_type = favicon(FAVICON_SVG)
            return _private(Response(body, media_type=icon_type))
        media_type = _STATIC.get(name)
        if media_type is None:
            return problem(404, "not_found", "Not found", "No such file.")
        return _private(Response(_static_file(name), media_type=media_type))

    async def _not_found(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = problem(404, "not_found", "Not found", "This page has / and /api.")
        await response(scope, receive, send)

    # ------------------------------------------------------------------ identity
    async def _principal(self, request: Request) -> str | None:
        answer = self._identify(request)
        if inspect.isawaitable(answer):
            answer = await answer
        if answer is None:
            return None
        if not isinstance(answer, str):
            raise TypeError(f"identify must return a str or None, not {type(answer).__name__}")
        return answer or None  # an empty name is nobody

    async def _refusal(self, request: Request) -> Response | None:
        if await self._principal(request) is None:
            return self._unauthenticated()
        return None

    def _unauthenticated(self) -> Response:
        return problem(
            401,
            "unauthenticated",
            "Sign in to see your downloads",
            "This page shows the downloads of the person signed in; this request "
            "carries no credentials the server accepts.",
            headers={"www-authenticate": self._challenge},
        )


def _private(response: Response) -> Response:
    response.headers["cache-control"] = "no-store"
    response.headers["x-content-type-options"] = "nosniff"
    return response


@cache
def _page_template() -> str:
    return resources.files(__package__).joinpath("own-downloads.html").read_text("utf-8")


@cache
def _static_file(name: str) -> bytes:
    return resources.files(__package__).joinpath(name).read_bytes()
