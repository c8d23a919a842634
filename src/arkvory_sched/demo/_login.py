"""The demo's browser login: a token typed once, kept in an HttpOnly cookie.

A browser cannot attach ``Authorization: Bearer …`` to a page it navigates to, so the
demo's pages (the operator page, a person's own downloads) would be out of reach of
the bearer tokens that curl and the SDK use. ``GET /login`` shows a form with one
token field; ``POST /login`` checks the token against every token the demo knows
(download and staff) and sets :data:`~._auth.TOKEN_COOKIE`; ``POST /logout`` clears it.
:func:`~._auth.principal_for` and :func:`~._auth.staff_for` read the cookie when a
request has no ``Authorization`` header.

The cookie is ``HttpOnly`` (no script reads it), ``SameSite=Strict`` (no other site's
page sends it, so a cross-site form post to the API arrives without credentials) and
``Path=/``. It is ``Secure`` when the login came over HTTPS; the demo usually runs on
plain HTTP on loopback. After the login the browser goes to ``next``, but only to a
path on this server: an absolute or scheme-relative URL would make the login form an
open redirect. A login or logout posted from another site is refused, so no other page
can log a visitor in under someone else's token.

A real artifact server has its own sessions; this exists only so the demo can be
tried in a browser.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Final
from urllib.parse import parse_qs, urlsplit

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from ._auth import TOKEN_COOKIE

__all__ = ["DEFAULT_NEXT", "login_routes", "safe_next"]

DEFAULT_NEXT: Final = "/"
_MAX_FORM_BYTES: Final = 4096
_CROSS_SITE: Final = frozenset({"cross-site", "same-site"})
# The login page has no script and no external resource but the demo's icon; it may
# only post to itself.
_PAGE_CSP: Final = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)


def safe_next(value: str | None) -> str:
    """``value`` if it is a path on this server (``/admin/downloads?x=1``), else
    :data:`DEFAULT_NEXT`.

    Refused: anything not starting with one ``/`` (``//evil.example`` is
    scheme-relative), a backslash (some browsers read ``/\\evil`` as ``//evil``), a
    scheme or host, and control characters.
    """
    if not value or not value.startswith("/") or value.startswith("//"):
        return DEFAULT_NEXT
    if "\\" in value or any(ord(char) < 0x20 or ord(char) == 0x7F for char in value):
        return DEFAULT_NEXT
    parts = urlsplit(value)
    if parts.scheme or parts.netloc:
        return DEFAULT_NEXT
    return value


def login_routes(is_known: Callable[[str], bool]) -> list[BaseRoute]:
    """``/login`` (GET, POST) and ``/logout`` (POST); ``is_known(token)`` says whether
    the demo knows a token (it must compare in constant time)."""

    async def show(request: Request) -> Response:
        return _page(safe_next(request.query_params.get("next")), None, 200)

    async def log_in(request: Request) -> Response:
        refused = _refuse_cross_site(request)
        if refused is not None:
            return refused
        form = await _read_form(request)
        if form is None:
            return _page(DEFAULT_NEXT, "The form was too large or not a form.", 400)
        token = form.get("token", "").strip()
        target = safe_next(form.get("next"))
        if not token or not is_known(token):
            return _page(target, "This token is not known to the demo server.", 401)
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(
            TOKEN_COOKIE,
            token,
            path="/",
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        response.headers["cache-control"] = "no-store"
        return response

    async def log_out(request: Request) -> Response:
        refused = _refuse_cross_site(request)
        if refused is not None:
            return refused
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(TOKEN_COOKIE, path="/", httponly=True, samesite="strict")
        response.headers["cache-control"] = "no-store"
        return response

    return [
        Route("/login", show, methods=["GET", "HEAD"]),
        Route("/login", log_in, methods=["POST"]),
        Route("/logout", log_out, methods=["POST"]),
    ]


def _refuse_cross_site(request: Request) -> Response | None:
    if request.headers.get("sec-fetch-site", "").lower() in _CROSS_SITE:
        return HTMLResponse("A login from another site is refused.", status_code=403)
    return None


async def _read_form(request: Request) -> dict[str, str] | None:
    """The url-encoded form, read with a limit (the demo has no multipart parser)."""
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != "application/x-www-form-urlencoded":
        return None
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > _MAX_FORM_BYTES:
            return None
    try:
        fields = parse_qs(body.decode("utf-8"), strict_parsing=False, max_num_fields=8)
    except (UnicodeDecodeError, ValueError):
        return None
    return {name: values[0] for name, values in fields.items()}


def _page(target: str, error: str | None, status: int) -> Response:
    message = f'<p class="error" role="alert">{html.escape(error)}</p>' if error else ""
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Log in · arkvory demo</title>
<link rel="icon" href="/favicon.svg" type="image/svg+xml">
<style>
body {{ font: 16px/1.5 system-ui, sans-serif; max-width: 26rem; margin: 3rem auto;
       padding: 0 1rem; color: #1c2430; }}
label {{ display: block; font-weight: 600; margin-bottom: .25rem; }}
input {{ width: 100%; box-sizing: border-box; padding: .5rem; font: inherit; }}
button {{ margin-top: 1rem; padding: .5rem 1.25rem; font: inherit; }}
.error {{ color: #a3171f; font-weight: 600; }}
</style></head><body>
<h1>Log in to the arkvory demo</h1>
<p>Paste a token of the demo server: a download token (<code>--token</code>) or a staff
token of the operator API (<code>--operator-token</code>, <code>--viewer-token</code>).</p>
{message}
<form method="post" action="/login">
<input type="hidden" name="next" value="{html.escape(target)}">
<label for="token">Token</label>
<input id="token" name="token" type="password" autocomplete="current-password" required
       autofocus>
<button type="submit">Log in</button>
</form></body></html>"""
    response = HTMLResponse(page, status_code=status)
    response.headers["cache-control"] = "no-store"
    response.headers["content-security-policy"] = _PAGE_CSP
    response.headers["x-content-type-options"] = "nosniff"
    return response
