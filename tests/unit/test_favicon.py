"""The project's icon: every page names one that answers, and a browser's own request
for ``/favicon.ico`` on the demo gets an icon instead of a ``404`` (issue #29).

Over ASGI against the demo's app as ``arkvory-demo serve`` builds it: the index, the
login page, the operator page and a person's own downloads each name their icon in a
``<link rel="icon">``; that address answers ``200`` with an image, and the page's own
Content-Security-Policy lets the browser load it.
"""

from __future__ import annotations

import re
import struct
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urljoin
from xml.etree import ElementTree

import httpx
import pytest

from arkvory_sched import PrincipalKind, SchedulerSettings
from arkvory_sched.api import Identity
from arkvory_sched.console import FAVICON_ICO, FAVICON_SVG, favicon
from arkvory_sched.demo import build_app
from arkvory_sched.demo._auth import TOKEN_COOKIE

pytestmark = pytest.mark.anyio

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
ICON_LINK = re.compile(r'<link rel="icon" href="([^"]+)"[^>]*>')
PAGES = {
    "/": {},
    "/login": {},
    "/admin/downloads/": {"cookie": f"{TOKEN_COOKIE}=op"},
    "/downloads/mine/": {"authorization": "Bearer person-token"},
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    app = build_app(
        tmp_path,
        {"person-token": ("alice", PrincipalKind.PERSON)},
        scheduler_settings=SchedulerSettings(),
        staff={"op": Identity("operator", "olga")},
    )
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://demo") as made:
        yield made


def ico_images(body: bytes) -> list[tuple[int, bytes]]:
    """The (size, image) entries of an ICO file; each must be a PNG."""
    reserved, kind, count = struct.unpack_from("<HHH", body)
    assert (reserved, kind) == (0, 1), "not an icon file"
    images = []
    for index in range(count):
        width, _h, _c, _r, _p, _bpp, length, offset = struct.unpack_from(
            "<BBBBHHII", body, 6 + 16 * index
        )
        images.append((width or 256, body[offset : offset + length]))
    return images


async def test_the_browsers_own_request_for_favicon_ico_gets_an_icon(
    client: httpx.AsyncClient,
) -> None:
    response = await client.get("/" + FAVICON_ICO)
    assert response.status_code == 200
    assert response.headers["content-type"] == "image/x-icon"
    assert "max-age=" in response.headers["cache-control"]
    images = ico_images(response.content)
    assert sorted(size for size, _ in images) == [16, 32, 48]
    assert all(image.startswith(PNG_SIGNATURE) for _, image in images)
    head = await client.head("/" + FAVICON_ICO)
    assert (head.status_code, head.content) == (200, b"")
    assert head.headers["content-length"] == str(len(response.content))
    refused = await client.post("/" + FAVICON_ICO)
    assert (refused.status_code, refused.headers["allow"]) == (405, "GET, HEAD")


async def test_the_svg_icon_is_an_svg_document(client: httpx.AsyncClient) -> None:
    response = await client.get("/" + FAVICON_SVG)
    assert response.status_code == 200
    assert response.headers["content-type"] == "image/svg+xml"
    assert ElementTree.fromstring(response.content).tag == "{http://www.w3.org/2000/svg}svg"
    assert response.content == favicon(FAVICON_SVG)[0]


def allows_own_images(policy: str | None) -> bool:
    """Whether a Content-Security-Policy lets a page load an image from its origin."""
    if policy is None:
        return True
    directives = {part.split()[0]: part.split()[1:] for part in policy.split(";") if part.strip()}
    sources = directives.get("img-src", directives.get("default-src", ["*"]))
    return "'self'" in sources or "*" in sources


@pytest.mark.parametrize("path", sorted(PAGES))
async def test_every_page_names_an_icon_that_answers_and_its_policy_allows(
    client: httpx.AsyncClient, path: str
) -> None:
    page = await client.get(path, headers=PAGES[path])
    assert page.status_code == 200, page.text
    links = ICON_LINK.findall(page.text)
    assert len(links) == 1, links
    icon = await client.get(urljoin(f"http://demo{path}", links[0]), headers=PAGES[path])
    assert icon.status_code == 200
    assert icon.headers["content-type"].startswith("image/")
    assert icon.content == favicon(FAVICON_SVG)[0]
    assert allows_own_images(page.headers.get("content-security-policy"))
