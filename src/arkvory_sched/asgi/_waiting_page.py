"""The waiting page: what a person's tab shows while their download waits (ADR 0035).

The middleware answers a browser's navigation with this page where any other client
gets the ``503`` ``download_queued`` problem document. It is the same answer in other
words: status ``503``, the same ``Retry-After`` and queue headers, plus ``Refresh`` at
the check time (and its ``<meta>`` twin), so the tab asks again by itself without
JavaScript; when a slot is free by then, that request gets the file and the browser's
download starts. The place lives in the ``arkvory-place`` cookie (``_browser.py``).

Everything the page shows comes from the decision and the request path, and every
value is HTML-escaped as it is put in; the template is filled in one pass, so a value
can never be read as a placeholder. The page has no inline script or style: its
Content-Security-Policy allows only its own stylesheet and script, which the
middleware serves from :data:`ASSET_DIRECTORY` below the path it is mounted at, with a
hash of their content in the URL. The page reads no clock: "now" is the check time
less ``Retry-After`` (rounded up by the scheduler, so at most a second early), and
without JavaScript the times read in UTC with "in about N min"; the script shows them in
the person's local time.
"""

from __future__ import annotations

import hashlib
import html
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from typing import Final
from urllib.parse import quote

from .._model import Queued
from ._asgi import Scope
from ._browser import KEEP_SECONDS, Visit
from ._problems import Answer, queue_headers

__all__ = [
    "ASSET_DIRECTORY",
    "CONTENT_SECURITY_POLICY",
    "in_words",
    "render_waiting_page",
    "waiting_page_asset",
]

#: Where the page's stylesheet and script are served, below the middleware's root path.
#: A leading dot: no artifact server serves hidden paths as objects.
ASSET_DIRECTORY: Final = "/.arkvory/"
CONTENT_SECURITY_POLICY: Final = (
    "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_ASSETS: Final[Mapping[str, bytes]] = {
    "waiting-page.css": b"text/css; charset=utf-8",
    "waiting-page.js": b"text/javascript; charset=utf-8",
}
_TEMPLATE: Final = "waiting-page.html"
_PLACEHOLDER: Final = re.compile(r"\{\{([a-z_]+)\}\}")
_MAX_NAME: Final = 120  # characters of a file name shown before it is cut
_PATH_SAFE: Final = "/!$&'()*+,;=:@-._~"


def render_waiting_page(decision: Queued, visit: Visit, scope: Scope) -> Answer:
    """The ``503`` page for a navigation whose download waits (see the module docstring)."""
    now = decision.check_at - decision.retry_after
    root = quote(str(scope.get("root_path", "")).rstrip("/"), safe=_PATH_SAFE)
    assets = root + ASSET_DIRECTORY
    keep_until = now + KEEP_SECONDS
    # An interval within one minute reads "12:28:05 and 12:28:40", not "12:28 and 12:28".
    narrow = _clock_text(decision.starts_earliest, now) == _clock_text(decision.starts_latest, now)
    values = {
        "file": _file_name(scope),
        "refresh": str(decision.retry_after),
        "css": f"{assets}waiting-page.css?v={_asset_hash('waiting-page.css')}",
        "js": f"{assets}waiting-page.js?v={_asset_hash('waiting-page.js')}",
        "place": "—" if decision.position is None else str(decision.position),
        "place_note": _place_note(decision.position),
        # Before the server has measured its link (nothing configured), the start is a
        # guess and the page says so; the interval is what it can promise (ADR 0042).
        "start_label": "First guess of the start" if decision.guessed else "Expected start",
        "start_iso": _iso(decision.starts_at),
        "start_text": _clock_text(decision.starts_at, now),
        "start_in_seconds": str(max(0, round(decision.starts_at - now))),
        "start_in": in_words(decision.starts_at - now),
        "earliest_iso": _iso(decision.starts_earliest),
        "earliest_text": _clock_text(decision.starts_earliest, now, seconds=narrow),
        "latest_iso": _iso(decision.starts_latest),
        "latest_text": _clock_text(decision.starts_latest, now, seconds=narrow),
        "check_iso": _iso(decision.check_at),
        "check_text": _clock_text(decision.check_at, now, seconds=True),
        "check_in": in_words(decision.retry_after),
        "keep": f"{KEEP_SECONDS // 60} minutes",
        "keep_iso": _iso(keep_until),
        "keep_text": _clock_text(keep_until, now),
    }
    body = _fill(_template(), values).encode("utf-8")
    headers = [
        (b"content-type", b"text/html; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"),
        (b"content-language", b"en"),
        (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
        (b"x-content-type-options", b"nosniff"),
        (b"referrer-policy", b"no-referrer"),
        (b"refresh", str(decision.retry_after).encode()),
        *queue_headers(decision),
    ]
    cookie = visit.cookie(decision.ticket)
    if cookie is not None:
        headers.append(cookie)
    return 503, headers, body


def waiting_page_asset(scope: Scope) -> Answer | None:
    """The page's stylesheet or script when the request names one, else ``None``."""
    path = str(scope.get("path", ""))
    root = str(scope.get("root_path", "")).rstrip("/")
    prefix = root + ASSET_DIRECTORY
    if not path.startswith(prefix):
        return None
    name = path[len(prefix) :]
    media_type = _ASSETS.get(name)
    if media_type is None:
        return None
    body = _asset(name)
    return (
        200,
        [
            (b"content-type", media_type),
            (b"content-length", str(len(body)).encode()),
            # The page names each file with a hash of its content.
            (b"cache-control", b"public, max-age=31536000, immutable"),
            (b"x-content-type-options", b"nosniff"),
        ],
        body,
    )


def in_words(seconds: float) -> str:
    """A wait as a person says it: ``in about 7 min``, ``in about 2 h 10 min``."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"in {whole} s" if whole else "now"
    minutes = round(whole / 60)
    if minutes < 90:
        return f"in about {minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"in about {hours} h {minutes} min" if minutes else f"in about {hours} h"
    return f"in about {round(hours / 24)} days"


def _place_note(position: int | None) -> str:
    if position is None:
        return "Your place is counted by the next check."
    if position == 1:
        return "You are next."
    ahead = position - 1
    return f"{ahead} download{'s' if ahead != 1 else ''} will start before yours."


def _file_name(scope: Scope) -> str:
    """The last segment of the path the person asked for (what their browser shows)."""
    name = str(scope.get("path", "")).rpartition("/")[2] or "this file"
    return name if len(name) <= _MAX_NAME else name[: _MAX_NAME - 1] + "…"


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(round(epoch), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _clock_text(epoch: float, now: float, *, seconds: bool = False) -> str:
    """``14:05 UTC``; with the day when it is not today (in UTC)."""
    moment = datetime.fromtimestamp(round(epoch), tz=UTC)
    text = moment.strftime("%H:%M:%S" if seconds else "%H:%M")
    if moment.date() != datetime.fromtimestamp(now, tz=UTC).date():
        text = moment.strftime("%a %d %b, ") + text
    return text + " UTC"


def _fill(template: str, values: Mapping[str, str]) -> str:
    """Each ``{{name}}`` replaced by its value, escaped, in one pass (a value is never
    read again, so a file named ``{{place}}`` stays a name)."""
    return _PLACEHOLDER.sub(lambda match: html.escape(values[match.group(1)], quote=True),
                            template)  # fmt: skip


@cache
def _template() -> str:
    return resources.files(__package__).joinpath(_TEMPLATE).read_text("utf-8")


@cache
def _asset(name: str) -> bytes:
    return resources.files(__package__).joinpath(name).read_bytes()


@cache
def _asset_hash(name: str) -> str:
    return hashlib.sha256(_asset(name)).hexdigest()[:12]
