"""The waiting page as bytes: escaping, its policy, its refresh, its assets (ADR 0035).

The page is built from a decision and a request path alone, so every value a person or
a file name can put in is checked here: names with markup, quotes, ampersands and
placeholders of the template, and the markup itself (no inline script, no inline
style, no handler attribute), read back with an HTML parser.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Any
from urllib.parse import quote

import pytest

from arkvory_sched import Queued
from arkvory_sched.asgi._browser import PlaceIds, Visit, read_visit
from arkvory_sched.asgi._problems import queue_headers
from arkvory_sched.asgi._waiting_page import (
    ASSET_DIRECTORY,
    CONTENT_SECURITY_POLICY,
    in_words,
    render_waiting_page,
    waiting_page_asset,
)

from ._helpers import queued_answer

WALL = 1_780_000_000.0  # 2026-05-28T20:26:40Z
TICKET = "2.mxbtgfsj.mxbtggkc.hRWG0qLYjWsLeYmPiWSy0CPNZcnaCsdzYaAMKoA-94w"
HOSTILE = [
    'a<b&c".iso',
    "<script>alert(1)<script>.iso",
    "<svg onload=alert(1)>.iso",
    '"><img src=x onerror=alert(1)>.iso',
    "{{place}}{{css}}.iso",
    "it's &amp; more.iso",
]


def decision(**changes: Any) -> Queued:
    return queued_answer(WALL, **{"ticket": TICKET, **changes})


def request(path: str = "/files/big.iso", *, root_path: str = "/files") -> dict[str, Any]:
    return {
        "type": "http",
        "path": path,
        "root_path": root_path,
        "headers": [(b"sec-fetch-mode", b"navigate")],
    }


def visit(scope: dict[str, Any]) -> Visit:
    found = read_visit(scope, "192.0.2.7", PlaceIds(b"k" * 32))
    assert found is not None and found.navigation
    return found


def page(
    queued: Queued | None = None, path: str = "/files/big.iso"
) -> tuple[dict[bytes, bytes], str]:
    scope = request(path)
    status, headers, body = render_waiting_page(queued or decision(), visit(scope), scope)
    assert status == 503
    names = [name for name, _ in headers]
    assert len(names) == len(set(names)), "a header appears twice"
    mapping = dict(headers)
    assert mapping[b"content-length"] == str(len(body)).encode()
    return mapping, body.decode("utf-8")


class Markup(HTMLParser):
    """Every element, attribute and text of a page, as a browser would tokenise it."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.texts: list[tuple[str, str]] = []
        self.all_text: list[str] = []
        self._open: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))
        if tag not in {"meta", "link", "br", "img", "input"}:
            self._open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if self._open and self._open[-1] == tag:
            self._open.pop()

    def handle_data(self, data: str) -> None:
        self.all_text.append(data)
        if data.strip():
            self.texts.append((self._open[-1] if self._open else "", data))

    @property
    def text(self) -> str:
        """All the text, as a person reads it: white space collapsed."""
        return re.sub(r"\s+", " ", "".join(self.all_text)).strip()


def parse(body: str) -> Markup:
    markup = Markup()
    markup.feed(body)
    markup.close()
    return markup


# --------------------------------------------------------------------- the answer
def test_the_page_is_the_same_503_with_the_same_queue_headers_and_a_refresh() -> None:
    queued = decision()
    headers, _ = page(queued)
    assert headers[b"content-type"] == b"text/html; charset=utf-8"
    assert headers[b"content-language"] == b"en"
    assert headers[b"cache-control"] == b"no-store"
    assert headers[b"x-content-type-options"] == b"nosniff"
    assert headers[b"referrer-policy"] == b"no-referrer"
    assert headers[b"refresh"] == headers[b"retry-after"] == b"300"
    for name, value in queue_headers(queued):
        assert headers[name] == value


def test_the_policy_allows_only_the_pages_own_files() -> None:
    headers, _ = page()
    policy = headers[b"content-security-policy"].decode()
    assert policy == CONTENT_SECURITY_POLICY
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
    assert directives["default-src"] == "'none'"
    for directive in ("script-src", "style-src", "img-src"):
        assert directives[directive] == "'self'"  # no 'unsafe-inline', no host, no data:
    assert directives["frame-ancestors"] == "'none'"
    assert directives["form-action"] == "'none'"


def test_the_cookie_carries_the_place_and_the_newest_ticket() -> None:
    headers, _ = page()
    cookie = headers[b"set-cookie"].decode()
    assert cookie.startswith(f"arkvory-place={PlaceIds(b'k' * 32).for_address('192.0.2.7')}.")
    assert f".{TICKET};" in cookie


def test_without_a_ticket_the_cookie_keeps_the_place_id_alone() -> None:
    headers, _ = page(decision(ticket=None))
    assert re.match(r"arkvory-place=[A-Za-z0-9_-]{22}; Path=", headers[b"set-cookie"].decode())


# --------------------------------------------------------------------- the markup
def test_no_inline_script_no_inline_style_no_handler() -> None:
    _, body = page()
    markup = parse(body)
    scripts = [attrs for tag, attrs in markup.elements if tag == "script"]
    assert len(scripts) == 1
    assert not [text for parent, text in markup.texts if parent in {"script", "style"}]
    assert "style" not in {tag for tag, _ in markup.elements}
    for tag, attrs in markup.elements:
        assert "style" not in attrs, tag
        assert not [name for name in attrs if name.startswith("on")], (tag, attrs)
        for name in ("href", "src"):
            value = attrs.get(name)
            if value is not None:
                assert value.startswith(f"/files{ASSET_DIRECTORY}"), (tag, value)


def test_a_guessed_start_is_called_a_first_guess() -> None:
    """A cold server without a configured rate guesses, and the page says so (ADR 0042)."""
    _, body = page(decision(guessed=True))
    text = parse(body).text
    assert "First guess of the start 20:36 UTC in about 10 min" in text
    assert "Expected start" not in text


def test_the_page_refreshes_itself_without_a_script() -> None:
    _, body = page()
    metas = [attrs for tag, attrs in parse(body).elements if tag == "meta"]
    assert {"http-equiv": "refresh", "content": "300"} in metas
    assert re.search(r'<html lang="en">', body)


def test_the_page_says_the_place_the_start_its_interval_and_what_to_do() -> None:
    _, body = page()
    text = parse(body).text
    assert "big.iso waits for its turn" in text
    assert "Your place in line 3 2 downloads will start before yours." in text
    assert "Expected start 20:36 UTC in about 10 min" in text
    assert "Likely between 20:35 UTC and 20:37 UTC" in text
    assert "This page checks again at 20:31:40 UTC (in about 5 min)." in text
    assert "Leave this tab open." in text
    assert "come back to the same link within 15 minutes (by 20:41 UTC)" in text
    assert "Times are in UTC." in text


def test_the_times_carry_machine_readable_instants_for_the_script() -> None:
    _, body = page()
    times = {
        attrs.get("id"): attrs.get("datetime") for tag, attrs in parse(body).elements
        if tag == "time"
    }  # fmt: skip
    assert times == {
        "start": "2026-05-28T20:36:40Z",
        "earliest": "2026-05-28T20:35:40Z",
        "latest": "2026-05-28T20:37:40Z",
        "check-at": "2026-05-28T20:31:40Z",
        "keep-until": "2026-05-28T20:41:40Z",
    }


@pytest.mark.parametrize(
    ("position", "note"),
    [
        (1, "You are next."),
        (2, "1 download will start before yours."),
        (None, "Your place is counted by the next check."),
    ],
)
def test_the_place_note_reads_right(position: int | None, note: str) -> None:
    _, body = page(decision(position=position))
    assert note in body


def test_a_narrow_interval_and_a_start_on_another_day_read_plainly() -> None:
    narrow = decision(starts_earliest=WALL + 601, starts_at=WALL + 610, starts_latest=WALL + 619)
    _, body = page(narrow)
    assert ">20:36:41 UTC</time>" in body and ">20:36:59 UTC</time>" in body
    tomorrow = decision(starts_at=WALL + 86_400, starts_latest=WALL + 90_000)
    _, body = page(tomorrow)
    assert ">Fri 29 May, 20:26 UTC</time>" in body
    assert "in about 24 h" in body


@pytest.mark.parametrize("name", HOSTILE)
def test_every_file_name_is_escaped_and_never_read_as_markup(name: str) -> None:
    scope = request("/files/" + name)
    scope["raw_path"] = quote("/files/" + name).encode()
    _, _, raw = render_waiting_page(decision(), visit(scope), scope)
    body = raw.decode()
    markup = parse(body)
    assert [tag for tag, _ in markup.elements].count("script") == 1
    assert {"img", "svg"}.isdisjoint(tag for tag, _ in markup.elements)
    shown = [data for parent, data in markup.texts if parent in {"title", "span"}]
    assert f"Waiting: {name}" in shown
    assert name in shown
    assert "{{" not in body.replace("{{place}}{{css}}", "")
    assert "3" in [data for parent, data in markup.texts if parent == "span"]


def test_a_long_name_is_cut_and_an_empty_one_named() -> None:
    _, body = page(path="/files/" + "x" * 300)
    assert "x" * 119 + "…" in body and "x" * 120 not in body
    _, body = page(path="/files/")
    assert "this file waits for its turn" in parse(body).text


@pytest.mark.parametrize(
    ("seconds", "words"),
    [
        (-5, "now"),
        (0, "now"),
        (1, "in 1 s"),
        (59.4, "in 59 s"),
        (60, "in about 1 min"),
        (89 * 60, "in about 89 min"),
        (90 * 60, "in about 1 h 30 min"),
        (3 * 3600, "in about 3 h"),
        (49 * 3600, "in about 2 days"),
    ],
)
def test_a_wait_in_words(seconds: float, words: str) -> None:
    assert in_words(seconds) == words


# --------------------------------------------------------------------- the assets
@pytest.mark.parametrize(
    ("name", "media_type"),
    [
        ("waiting-page.css", b"text/css; charset=utf-8"),
        ("waiting-page.js", b"text/javascript; charset=utf-8"),
    ],
)
def test_the_assets_are_served_below_the_root_path(name: str, media_type: bytes) -> None:
    answer = waiting_page_asset(request(f"/files{ASSET_DIRECTORY}{name}"))
    assert answer is not None
    status, headers, body = answer
    mapping = dict(headers)
    assert status == 200
    assert mapping[b"content-type"] == media_type
    assert mapping[b"content-length"] == str(len(body)).encode()
    assert mapping[b"x-content-type-options"] == b"nosniff"
    assert len(body) > 500
    _, page_body = page()
    assert re.search(rf'"/files/\.arkvory/{re.escape(name)}\?v=[0-9a-f]{{12}}"', page_body)


@pytest.mark.parametrize(
    "path",
    [
        "/files/.arkvory/other.js",
        "/files/.arkvory/",
        "/files/.arkvory/../waiting-page.js",
        "/files/big.iso",
        "/.arkvory/waiting-page.js",  # outside the middleware's root path
    ],
)
def test_anything_else_is_left_to_the_application(path: str) -> None:
    assert waiting_page_asset(request(path)) is None


def test_the_script_reads_no_wall_clock_for_a_duration() -> None:
    answer = waiting_page_asset(request(f"/files{ASSET_DIRECTORY}waiting-page.js"))
    assert answer is not None
    script = answer[2].decode()
    assert "performance.now()" in script
    assert "Date.now()" not in script
    assert "eval(" not in script and "innerHTML" not in script
