"""Which requests are a person's navigation, and which place a browser brings (ADR 0035).

Pure functions of the request: the headers browsers send (Chromium and Firefox send
``Sec-Fetch-*``; older browsers and text browsers only ``Accept``), the headers tools
send (curl, wget, pip, npm: ``Accept: */*`` or a media type of their own), the place
cookie in every shape a client may mangle it into, and the cookie's attributes.
"""

from __future__ import annotations

from typing import Any

import pytest

from arkvory_sched.asgi._browser import (
    KEEP_SECONDS,
    PLACE_COOKIE,
    PlaceIds,
    Visit,
    accepts_html,
    browser_path,
    is_navigation,
    read_visit,
)

BROWSER_ACCEPT = (
    "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,"
    "image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7"
)
PLACE_ID = "AbCdEfGhIjKlMnOpQrStUv"  # 22 characters of base64url, as PlaceIds makes them
TICKET = "2.mxbtgfsj.mxbtggkc.hRWG0qLYjWsLeYmPiWSy0CPNZcnaCsdzYaAMKoA-94w"
IDS = PlaceIds(b"k" * 32)


def scope(
    headers: dict[str, str] | list[tuple[str, str]] | None = None,
    *,
    path: str = "/files/big.iso",
    raw_path: bytes | None = None,
    root_path: str = "/files",
    scheme: str = "http",
) -> dict[str, Any]:
    pairs = list(headers.items()) if isinstance(headers, dict) else list(headers or [])
    return {
        "type": "http",
        "method": "GET",
        "scheme": scheme,
        "path": path,
        "raw_path": raw_path if raw_path is not None else path.encode(),
        "root_path": root_path,
        "headers": [(name.lower().encode(), value.encode("latin-1")) for name, value in pairs],
    }


# --------------------------------------------------------------------- navigation
@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        # Chromium and Firefox: a click, a typed address, a refresh, <a download>.
        ({"sec-fetch-mode": "navigate", "sec-fetch-dest": "document",
          "accept": BROWSER_ACCEPT}, True),
        ({"Sec-Fetch-Mode": "Navigate", "Sec-Fetch-Site": "same-origin"}, True),
        # A browser without fetch metadata (older Safari, text browsers).
        ({"accept": BROWSER_ACCEPT}, True),
        ({"accept": "text/html"}, True),
        ({"accept": "TEXT/HTML; level=1; q=0.5"}, True),
        # A page's own fetch, an <img>, a <video>: fetch metadata that is no navigation.
        ({"sec-fetch-mode": "cors", "accept": "text/html"}, False),
        ({"sec-fetch-mode": "no-cors", "sec-fetch-dest": "image"}, False),
        ({"sec-fetch-dest": "document", "accept": "text/html"}, False),  # no mode: unsure
        # Tools: curl, wget, pip, npm, docker, the SDK.
        ({"accept": "*/*", "user-agent": "curl/8.5.0"}, False),
        ({"accept": "*/*", "user-agent": "Wget/1.21.4"}, False),
        ({"accept": "application/json"}, False),
        ({"accept": "application/vnd.npm.install-v1+json; q=1.0, application/json; q=0.8"},
         False),
        ({}, False),
        # HTML refused explicitly, or an unreadable quality.
        ({"accept": "text/html;q=0, */*"}, False),
        ({"accept": "text/html;q=zero"}, False),
        ({"accept": "text/htmlx, application/xhtml+xml"}, False),
        # A range is a download manager resuming, never a person's click.
        ({"sec-fetch-mode": "navigate", "range": "bytes=100-"}, False),
        ({"accept": "text/html", "range": "bytes=0-"}, False),
    ],
)  # fmt: skip
def test_a_navigation_is_what_a_browser_tab_waits_for(
    headers: dict[str, str], expected: bool
) -> None:
    visit = read_visit(scope(headers), "192.0.2.7", IDS)
    assert (visit is not None and visit.navigation) is expected


def test_is_navigation_reads_only_the_mode_when_fetch_metadata_is_sent() -> None:
    assert is_navigation(mode="navigate", fetch_metadata=True, accept=None, ranged=False)
    assert not is_navigation(mode=None, fetch_metadata=True, accept="text/html", ranged=False)
    assert is_navigation(mode=None, fetch_metadata=False, accept="text/html", ranged=False)


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        ("text/html", True),
        ("text/plain, text/html;q=0.1", True),
        ("text/html;q=0.0", False),
        ("*/*", False),  # accepting anything is not asking for a page
        ("text/*", False),
        ("", False),
    ],
)
def test_accepts_html_needs_text_html_named_with_a_quality(accept: str, expected: bool) -> None:
    assert accepts_html(accept) is expected


def test_a_tool_without_a_place_cookie_is_no_visit_at_all() -> None:
    """Nothing about a tool's request changes: no identity, no ticket, no cookie."""
    assert read_visit(scope({"accept": "*/*", "user-agent": "curl/8.5.0"}), "::1", IDS) is None


# --------------------------------------------------------------------- the place
def test_a_navigation_without_a_cookie_gets_the_place_of_its_address() -> None:
    first = read_visit(scope({"sec-fetch-mode": "navigate"}), "192.0.2.7", IDS)
    again = read_visit(scope({"accept": "text/html"}), "192.0.2.7", IDS)
    other = read_visit(scope({"sec-fetch-mode": "navigate"}), "192.0.2.8", IDS)
    assert first is not None and again is not None and other is not None
    assert first.place_id == again.place_id == IDS.for_address("192.0.2.7")
    assert first.place_id != other.place_id
    assert first.identity == f"browser-place:{first.place_id}"
    assert first.ticket is None


def test_place_ids_are_unguessable_without_the_process_key() -> None:
    assert PlaceIds(b"a" * 32).for_address("192.0.2.7") != IDS.for_address("192.0.2.7")
    assert PlaceIds().for_address("192.0.2.7") != PlaceIds().for_address("192.0.2.7")
    assert len(IDS.for_address("2001:db8::1")) == 22


def test_the_cookie_brings_its_place_and_ticket_from_any_address() -> None:
    cookie = f"theme=dark; {PLACE_COOKIE}={PLACE_ID}.{TICKET}; other=1"
    visit = read_visit(scope({"cookie": cookie, "sec-fetch-mode": "navigate"}), "10.0.0.9", IDS)
    assert visit is not None
    assert (visit.navigation, visit.place_id, visit.ticket) == (True, PLACE_ID, TICKET)


def test_the_cookie_is_read_for_a_request_that_is_no_navigation() -> None:
    """A download manager's resumption carries the cookie: it finds the same session."""
    headers = {"cookie": f"{PLACE_COOKIE}={PLACE_ID}", "range": "bytes=1000-"}
    visit = read_visit(scope(headers), "10.0.0.9", IDS)
    assert visit is not None
    assert (visit.navigation, visit.place_id, visit.ticket) == (False, PLACE_ID, None)


@pytest.mark.parametrize(
    "value",
    [
        "",
        "garbage",
        "AbCdEfGhIjKlMnOpQrStU",  # one character short
        "AbCdEfGhIjKlMnOpQrStUvW",  # one too many
        "AbCdEfGhIjKlMnOpQrSt<v",
        "../../../etc/passwd",
        "x" * 5000,
    ],
)
def test_a_cookie_that_is_no_place_is_ignored(value: str) -> None:
    headers = {"cookie": f"{PLACE_COOKIE}={value}", "sec-fetch-mode": "navigate"}
    visit = read_visit(scope(headers), "192.0.2.7", IDS)
    assert visit is not None
    assert visit.place_id == IDS.for_address("192.0.2.7")  # as if it had sent none
    assert visit.ticket is None


@pytest.mark.parametrize("ticket", ["", "2.a.b.<script>", "2.a b.c", "2." + "a" * 300, "2.a,b"])
def test_a_ticket_that_cannot_be_one_is_dropped_and_the_place_id_kept(ticket: str) -> None:
    headers = {"cookie": f"{PLACE_COOKIE}={PLACE_ID}.{ticket}", "sec-fetch-mode": "navigate"}
    visit = read_visit(scope(headers), "192.0.2.7", IDS)
    assert visit is not None
    assert (visit.place_id, visit.ticket) == (PLACE_ID, None)


def test_the_first_well_formed_place_cookie_counts_across_cookie_headers() -> None:
    headers = [
        ("cookie", f"{PLACE_COOKIE}=broken"),
        ("cookie", f'{PLACE_COOKIE}="{PLACE_ID}.{TICKET}"'),
        ("cookie", f"{PLACE_COOKIE}={'Z' * 22}"),
    ]
    visit = read_visit(scope(headers), "192.0.2.7", IDS)
    assert visit is not None
    assert (visit.place_id, visit.ticket) == (PLACE_ID, TICKET)


# --------------------------------------------------------------------- the cookie
def test_the_cookie_is_http_only_lax_scoped_to_the_object_and_kept_for_the_keep_time() -> None:
    visit = read_visit(scope({"sec-fetch-mode": "navigate"}), "192.0.2.7", IDS)
    assert visit is not None
    cookie = visit.cookie(TICKET)
    assert cookie is not None
    name, value = cookie
    assert name == b"set-cookie"
    parts = value.decode().split("; ")
    assert parts[0] == f"{PLACE_COOKIE}={visit.place_id}.{TICKET}"
    assert set(parts[1:]) == {
        "Path=/files/big.iso",
        f"Max-Age={KEEP_SECONDS}",
        "HttpOnly",
        "SameSite=Lax",
    }
    assert KEEP_SECONDS == 15 * 60  # a ticket's validity (R-TICKET-2)


def test_the_cookie_is_secure_over_https_and_without_a_ticket_when_served() -> None:
    visit = read_visit(scope({"sec-fetch-mode": "navigate"}, scheme="https"), "::1", IDS)
    assert visit is not None
    cookie = visit.cookie(None)
    assert cookie is not None
    parts = cookie[1].decode().split("; ")
    assert parts[0] == f"{PLACE_COOKIE}={visit.place_id}"
    assert "Secure" in parts


@pytest.mark.parametrize(
    ("path", "raw_path", "expected"),
    [
        ("/files/big.iso", b"/files/big.iso", "/files/big.iso"),
        # Escapes stay as the browser sent them: the cookie's Path must match them.
        ('/files/a<b&c".iso', b"/files/a%3Cb%26c%22.iso", "/files/a%3Cb%26c%22.iso"),
        ("/files/caf\u00e9.iso", b"/files/caf%C3%A9.iso", "/files/caf%C3%A9.iso"),
        # A proxy's prefix that the server was told of (root_path) is put back.
        ("/mirror/files/big.iso", b"/files/big.iso", "/mirror/files/big.iso"),
        # A ';' cannot be in a cookie attribute: no cookie then.
        ("/files/a;b.iso", b"/files/a;b.iso", None),
        ("/files/a\x01.iso", b"/files/a\x01.iso", None),
    ],
)
def test_the_cookie_path_is_the_path_the_browser_asked_for(
    path: str, raw_path: bytes, expected: str | None
) -> None:
    assert browser_path(scope(path=path, raw_path=raw_path)) == expected


def test_without_a_cookie_path_a_navigation_keeps_the_address_as_its_key() -> None:
    visit = read_visit(
        scope({"sec-fetch-mode": "navigate"}, path="/files/a;b", raw_path=b"/files/a;b"),
        "192.0.2.7",
        IDS,
    )
    assert visit == Visit(True, None, None, None, False)
    assert visit.identity is None
    assert visit.cookie(TICKET) is None
