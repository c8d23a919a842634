"""The project's icon for every page a host serves: one SVG and one ICO, package data.

A browser asks a site for ``/favicon.ico`` unless a page names its icon, and a ``404``
there is noise in every log and an empty tab. The pages of this library (the operator
page, a person's own downloads) name the SVG under their own static path, which their
Content-Security-Policies allow (``img-src 'self'``), so they need nothing from the
host. A host that also wants the browser's own request answered, for its other pages
and for files opened in a tab, routes :func:`favicon_app` at ``/favicon.ico`` (and
``/favicon.svg``); the demo does. The ICO holds the SVG drawn at 16, 32 and 48 pixels.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Final

from starlette.types import Receive, Scope, Send

__all__ = ["FAVICON_ICO", "FAVICON_SVG", "favicon", "favicon_app"]

FAVICON_SVG: Final = "favicon.svg"
FAVICON_ICO: Final = "favicon.ico"
_MEDIA_TYPES: Final = {FAVICON_SVG: "image/svg+xml", FAVICON_ICO: "image/x-icon"}
_STATIC_PACKAGE: Final = "arkvory_sched.console.static"
_MAX_AGE: Final = "public, max-age=86400"


@cache
def favicon(name: str = FAVICON_ICO) -> tuple[bytes, str]:
    """The icon file ``name`` (:data:`FAVICON_SVG` or :data:`FAVICON_ICO`) and its type."""
    media_type = _MEDIA_TYPES.get(name)
    if media_type is None:
        raise ValueError(f"no icon {name!r}; there are {sorted(_MEDIA_TYPES)}")
    return resources.files(_STATIC_PACKAGE).joinpath(name).read_bytes(), media_type


def favicon_app(name: str = FAVICON_ICO) -> _Favicon:
    """A pure ASGI app answering ``GET``/``HEAD`` with the icon ``name``, cached for a day."""
    body, media_type = favicon(name)
    return _Favicon(body, media_type)


class _Favicon:
    """One icon file as an ASGI app (an instance, so a Starlette ``Route`` passes the
    scope through as to any ASGI app)."""

    def __init__(self, body: bytes, media_type: str) -> None:
        self._body = body
        self._headers = [
            (b"content-type", media_type.encode("ascii")),
            (b"content-length", str(len(body)).encode("ascii")),
            (b"cache-control", _MAX_AGE.encode("ascii")),
            (b"x-content-type-options", b"nosniff"),
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        method = scope["method"]
        if method not in ("GET", "HEAD"):
            await send(
                {
                    "type": "http.response.start",
                    "status": 405,
                    "headers": [(b"allow", b"GET, HEAD"), (b"content-length", b"0")],
                }
            )
            await send({"type": "http.response.body", "body": b""})
            return
        await send({"type": "http.response.start", "status": 200, "headers": self._headers})
        await send({"type": "http.response.body", "body": b"" if method == "HEAD" else self._body})
