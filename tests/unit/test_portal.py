"""The own-downloads app over ASGI (issue #19): who may see it, what the JSON holds.

The browser tests (``tests/browser``) drive the page against the real demo; these pin
the app's contract on an in-memory scheduler: the host's ``identify`` decides, ``401``
is a problem document, the JSON carries the principal's own downloads and no key or
ticket, and the page's headers keep it private and inert.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Mount

from arkvory_sched import (
    Admitted,
    DownloadRequest,
    InMemoryDownloadScheduler,
    OwnDownloads,
    PrincipalKind,
    Queued,
    SchedulerSettings,
    StoreUnavailableError,
)
from arkvory_sched.portal import CONTENT_SECURITY_POLICY, own_downloads_app
from arkvory_sched.testing import FakeClock

pytestmark = pytest.mark.anyio

MIB = 1024 * 1024
TICKET_KEY = b"portal-test-ticket-key-000000001"
PEOPLE = {"Bearer ann-token": "ann", "Bearer bob-token": "bob"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def identify(request: Request) -> str | None:
    return PEOPLE.get(request.headers.get("authorization", ""))


def request(principal: str, download_id: str, object_id: str) -> DownloadRequest:
    return DownloadRequest(
        principal=principal,
        principal_kind=PrincipalKind.PERSON,
        object_id=object_id,
        object_size=40 * MIB,
        download_id=download_id,
        client_address="192.0.2.1",
    )


@pytest.fixture
async def scheduler() -> InMemoryDownloadScheduler:
    """One slot held by bob; ann waits with one download, after bob's second."""
    made = InMemoryDownloadScheduler(
        SchedulerSettings(sessions=1, reserve=0), clock=FakeClock(), ticket_keys=[TICKET_KEY]
    )
    assert isinstance(await made.admit(request("bob", "bob-dl-1", "bob/one.iso")), Admitted)
    assert isinstance(await made.admit(request("bob", "bob-dl-2", "bob/two.iso")), Queued)
    assert isinstance(await made.admit(request("ann", "ann-dl-1", "ann/mine.iso")), Queued)
    return made


@pytest.fixture
async def client(scheduler: InMemoryDownloadScheduler) -> AsyncIterator[httpx.AsyncClient]:
    app = Starlette(
        routes=[
            Mount(
                "/downloads/mine",
                app=own_downloads_app(scheduler=scheduler, identify=identify),
            )
        ]
    )
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as made:
        yield made


async def test_identify_has_no_default(scheduler: InMemoryDownloadScheduler) -> None:
    with pytest.raises(TypeError):
        own_downloads_app(scheduler=scheduler)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="identify must be a callable"):
        own_downloads_app(scheduler=scheduler, identify="ann")  # type: ignore[arg-type]


@pytest.mark.parametrize("path", ["/downloads/mine/", "/downloads/mine/api"])
@pytest.mark.parametrize("authorization", [None, "Bearer unknown", "Basic YW5uOng="])
async def test_nobody_the_host_accepts_gets_a_401_problem(
    client: httpx.AsyncClient, path: str, authorization: str | None
) -> None:
    headers = {} if authorization is None else {"authorization": authorization}
    response = await client.get(path, headers=headers)
    assert response.status_code == 401
    assert response.headers["content-type"] == "application/problem+json"
    assert response.headers["www-authenticate"] == 'Bearer realm="arkvory-sched"'
    assert response.headers["cache-control"] == "no-store"
    document = response.json()
    assert (document["status"], document["reason"]) == (401, "unauthenticated")
    assert document["type"] == "urn:arkvory:problem:unauthenticated"
    assert "ann" not in response.text and "bob" not in response.text


async def test_the_json_holds_the_principals_own_downloads_and_no_key_or_ticket(
    client: httpx.AsyncClient,
) -> None:
    response = await client.get(
        "/downloads/mine/api", headers={"authorization": "Bearer ann-token"}
    )
    assert response.status_code == 200
    assert response.headers["cache-control"] == "no-store"
    assert response.headers["x-content-type-options"] == "nosniff"
    document = response.json()
    assert (document["principal"], document["total"], document["truncated"]) == ("ann", 1, False)
    [mine] = document["downloads"]
    assert mine["objectId"] == "ann/mine.iso" and mine["downloadId"] == "ann-dl-1"
    assert (mine["state"], mine["class"], mine["queueClass"]) == (
        "waiting",
        "interactive",
        "interactive",
    )
    assert mine["position"] == 2  # behind bob's second download
    assert mine["startsEarliest"] <= mine["startsAt"] <= mine["startsLatest"]
    assert mine["startsInSeconds"] >= 0
    assert mine["lowerClasses"] == ["release", "bulk", "background"]
    assert (mine["bytesDelivered"], mine["progress"], mine["rate"]) == (0, 0.0, None)
    assert document["advice"]["classHeader"] == "Arkvory-Download-Class"
    # The page says what lowering a class does with the weights in force.
    assert document["advice"]["classWeights"] == {
        "interactive": 8,
        "release": 4,
        "bulk": 2,
        "background": 1,
    }
    text = response.text
    assert "bob" not in text
    assert "ticket" not in text.lower() and "key" not in json.dumps(list(mine))


async def test_the_json_says_when_a_start_is_a_first_guess(
    scheduler: InMemoryDownloadScheduler, client: httpx.AsyncClient
) -> None:
    """Nothing configured and nothing measured, ann's start is told on a guess of the
    link's rate, and the JSON says so beside it, as her poll's problem document does
    (ADR 0042); once the rate is configured it is an expected start again."""

    async def ann_waits() -> dict[str, object]:
        response = await client.get(
            "/downloads/mine/api", headers={"authorization": "Bearer ann-token"}
        )
        [mine] = response.json()["downloads"]
        assert mine["state"] == "waiting"
        return dict(mine)

    guessed = await ann_waits()
    assert guessed["startsGuessed"] is True
    keys = list(guessed)
    assert keys.index("startsGuessed") == keys.index("startsAt") + 1  # beside the start
    await scheduler.configure(scheduler.settings.with_changes(bandwidth=10 * MIB))
    assert (await ann_waits())["startsGuessed"] is False


async def test_the_page_is_private_and_runs_only_its_own_script(
    client: httpx.AsyncClient,
) -> None:
    for path in ("/downloads/mine/", "/downloads/mine"):
        response = await client.get(
            path, headers={"authorization": "Bearer ann-token"}, follow_redirects=True
        )
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/html; charset=utf-8"
        assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert "script-src 'self'" in CONTENT_SECURITY_POLICY
        assert "unsafe-inline" not in CONTENT_SECURITY_POLICY
        assert response.headers["cache-control"] == "no-store"
        assert response.headers["x-content-type-options"] == "nosniff"
        assert 'src="/downloads/mine/static/own-downloads.js"' in response.text
        assert 'data-api="/downloads/mine/api"' in response.text
        assert "<script>" not in response.text  # no inline script for the CSP to refuse
    script = await client.get("/downloads/mine/static/own-downloads.js")
    assert script.headers["content-type"] == "text/javascript; charset=utf-8"
    assert "textContent" in script.text and "innerHTML" not in script.text
    missing = await client.get("/downloads/mine/static/../_app.py")
    assert missing.status_code == 404


async def test_an_async_identify_is_awaited_and_a_wrong_answer_is_refused(
    scheduler: InMemoryDownloadScheduler,
) -> None:
    async def slow_identify(request: Request) -> str | None:
        return "ann"

    def wrong(request: Request) -> str | None:
        return 42  # type: ignore[return-value]

    for check, expected in ((slow_identify, 200), (wrong, None)):
        app = own_downloads_app(scheduler=scheduler, identify=check)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as made:
            if expected is None:
                with pytest.raises(TypeError, match="identify must return a str or None"):
                    await made.get("/api")
            else:
                assert (await made.get("/api")).status_code == expected


async def test_an_unreadable_store_is_503_not_an_empty_list() -> None:
    class Unreachable(InMemoryDownloadScheduler):
        async def downloads_of(self, principal: str, *, limit: int = 100) -> OwnDownloads:
            raise StoreUnavailableError("the shared queue cannot be read right now")

    app = own_downloads_app(scheduler=Unreachable(), identify=lambda request: "ann")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as made:
        response = await made.get("/api")
    assert response.status_code == 503
    assert response.json()["reason"] == "storage_unavailable"
    assert response.headers["retry-after"] == "10"


async def test_the_advice_carries_the_weights_the_scheduler_runs_now(
    scheduler: InMemoryDownloadScheduler, client: httpx.AsyncClient
) -> None:
    await scheduler.configure(scheduler.settings.with_changes(weights=(9, 5, 3, 2)))
    response = await client.get(
        "/downloads/mine/api", headers={"authorization": "Bearer ann-token"}
    )
    weights = response.json()["advice"]["classWeights"]
    assert weights == {"interactive": 9, "release": 5, "bulk": 3, "background": 2}


async def test_a_download_in_the_lowest_class_has_no_lower_one(
    scheduler: InMemoryDownloadScheduler, client: httpx.AsyncClient
) -> None:
    lowest = DownloadRequest(
        principal="ann",
        principal_kind=PrincipalKind.PERSON,
        object_id="ann/mirror.iso",
        object_size=40 * MIB,
        download_id="ann-dl-2",
        client_address="192.0.2.1",
        requested_class="background",
    )
    assert isinstance(await scheduler.admit(lowest), Queued)
    response = await client.get(
        "/downloads/mine/api", headers={"authorization": "Bearer ann-token"}
    )
    lowered = {d["objectId"]: d["lowerClasses"] for d in response.json()["downloads"]}
    assert lowered == {"ann/mine.iso": ["release", "bulk", "background"], "ann/mirror.iso": []}
