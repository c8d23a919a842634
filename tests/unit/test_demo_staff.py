"""The demo's staff tokens for the operator API: parsed, checked, never open."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from starlette.requests import Request

from arkvory_sched import SchedulerSettings
from arkvory_sched._classes import PrincipalKind
from arkvory_sched.api import API_PREFIX, Identity
from arkvory_sched.demo import build_app
from arkvory_sched.demo._auth import (
    ANONYMOUS_LINK,
    TOKEN_COOKIE,
    parse_staff_token,
    parse_tokens,
    principal_for,
    staff_for,
)
from arkvory_sched.demo._cli import OPERATOR_TOKEN_VARIABLE, _print_staff, _staff
from arkvory_sched.demo._login import safe_next

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def request(authorization: str | None) -> Request:
    headers = [] if authorization is None else [(b"authorization", authorization.encode())]
    return Request({"type": "http", "method": "GET", "path": "/", "headers": headers})


def test_a_staff_token_is_token_equals_name() -> None:
    assert parse_staff_token("s3cret=olga", "operator") == ("s3cret", Identity("operator", "olga"))
    assert parse_staff_token("v1", "viewer") == ("v1", Identity("viewer", "demo-viewer"))
    for bad in ("=olga", "tok en=olga", "tok="):
        with pytest.raises(ValueError, match="invalid token"):
            parse_staff_token(bad, "operator")


def test_only_a_bearer_staff_token_is_someone() -> None:
    staff = {"op": Identity("operator", "olga"), "view": Identity("viewer", "victor")}
    assert staff_for(request("Bearer op"), staff) == Identity("operator", "olga")
    assert staff_for(request("bearer view"), staff) == Identity("viewer", "victor")
    for refused in (None, "Bearer", "Bearer nope", "Basic op", "op"):
        assert staff_for(request(refused), staff) is None, refused


def test_without_tokens_the_demo_makes_one_per_role_and_prints_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(OPERATOR_TOKEN_VARIABLE, raising=False)
    made = _staff(None, "operator")
    ((token, identity),) = made.items()
    assert identity == Identity("operator", "demo-operator")
    assert len(token) >= 20
    assert _staff(None, "operator") != made, "random, not a fixed well-known token"
    _print_staff(made, "http://127.0.0.1:8000/api")
    assert f"operator token for demo-operator: {token}" in capsys.readouterr().out


def test_the_variable_gives_the_token_and_options_win_over_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(OPERATOR_TOKEN_VARIABLE, "from-env=erin")
    assert _staff(None, "operator") == {"from-env": Identity("operator", "erin")}
    assert _staff(["opt=otto"], "operator") == {"opt": Identity("operator", "otto")}


async def test_the_demo_mounts_the_api_for_its_staff_only(tmp_path: Path) -> None:
    staff = {"op": Identity("operator", "olga")}
    app = build_app(tmp_path, {}, scheduler_settings=SchedulerSettings(), staff=staff)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://demo") as client:
        url = f"{API_PREFIX}/settings"
        assert (await client.get(url)).status_code == 401
        assert (await client.get(url, headers={"authorization": "Bearer x"})).status_code == 401
        answer = await client.get(url, headers={"authorization": "Bearer op"})
        assert answer.status_code == 200, answer.text
        assert answer.json()["revision"] == 0
    unstaffed = build_app(tmp_path, {}, scheduler_settings=SchedulerSettings())
    transport = httpx.ASGITransport(app=unstaffed)
    async with httpx.AsyncClient(transport=transport, base_url="http://demo") as client:
        answer = await client.get(f"{API_PREFIX}/state", headers={"authorization": "Bearer op"})
        assert answer.status_code == 401


def cookie_request(cookie: str, authorization: str | None = None) -> Request:
    headers = [(b"cookie", cookie.encode())]
    if authorization is not None:
        headers.append((b"authorization", authorization.encode()))
    return Request({"type": "http", "method": "GET", "path": "/", "headers": headers})


def test_the_login_cookie_counts_only_without_an_authorization_header() -> None:
    staff = {"op": Identity("operator", "olga")}
    assert staff_for(cookie_request(f"{TOKEN_COOKIE}=op"), staff) == Identity("operator", "olga")
    assert staff_for(cookie_request(f"a=1; {TOKEN_COOKIE}=op; b=2"), staff) is not None
    assert staff_for(cookie_request(f"{TOKEN_COOKIE}=nope"), staff) is None
    assert staff_for(cookie_request("other=op"), staff) is None
    # The header wins, even when it is refused: credentials never combine.
    assert staff_for(cookie_request(f"{TOKEN_COOKIE}=op", "Bearer nope"), staff) is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("/admin/downloads", "/admin/downloads"),
        ("/me?tab=2", "/me?tab=2"),
        ("//evil.example/x", "/"),
        ("/\\evil.example", "/"),
        ("https://evil.example/", "/"),
        ("javascript:alert(1)", "/"),
        ("admin", "/"),
        ("/a\r\nSet-Cookie: x=1", "/"),
        (None, "/"),
    ],
)
def test_the_login_redirects_only_to_a_path_on_this_server(
    value: str | None, expected: str
) -> None:
    assert safe_next(value) == expected


async def test_the_browser_login_sets_a_strict_http_only_cookie(tmp_path: Path) -> None:
    staff = {"op": Identity("operator", "olga")}
    tokens = parse_tokens(["dl=alice:person"])
    app = build_app(tmp_path, tokens, scheduler_settings=SchedulerSettings(), staff=staff)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://demo") as client:
        form = (await client.get("/login?next=/admin/downloads")).text
        assert 'name="token"' in form and 'value="/admin/downloads"' in form
        refused = await client.post("/login", data={"token": "wrong", "next": "/x"})
        assert refused.status_code == 401
        assert TOKEN_COOKIE not in refused.headers.get("set-cookie", "")
        answer = await client.post("/login", data={"token": "op", "next": "https://evil.example/"})
        assert answer.status_code == 303
        assert answer.headers["location"] == "/"
        cookie = answer.headers["set-cookie"].lower()
        assert cookie.startswith(f"{TOKEN_COOKIE}=op;")
        for attribute in ("httponly", "samesite=strict", "path=/"):
            assert attribute in cookie, attribute
        settings = await client.get(f"{API_PREFIX}/settings")
        assert settings.status_code == 200, "the cookie alone identifies the operator"
        cross = await client.post(
            "/login", data={"token": "dl"}, headers={"sec-fetch-site": "cross-site"}
        )
        assert cross.status_code == 403
        out = await client.post("/logout")
        assert out.status_code == 303
        assert (await client.get(f"{API_PREFIX}/settings")).status_code == 401
        assert (await client.post("/login", data={"token": "dl"})).status_code == 303


def test_principal_for_reads_the_login_cookie() -> None:
    tokens = parse_tokens(["dl=alice:person"])

    def scope(*headers: tuple[bytes, bytes]) -> dict[str, object]:
        return {"type": "http", "headers": list(headers)}

    cookie = (b"cookie", f"{TOKEN_COOKIE}=dl".encode())
    assert principal_for(scope(cookie), tokens) == ("alice", PrincipalKind.PERSON)
    assert principal_for(scope((b"cookie", f"{TOKEN_COOKIE}=x".encode())), tokens) is None
    assert principal_for(scope((b"cookie", b"unrelated=1")), tokens) == ANONYMOUS_LINK
    assert principal_for(scope(cookie, (b"authorization", b"Bearer x")), tokens) is None


async def test_the_demo_serves_the_page_and_its_data_to_its_staff_only(tmp_path: Path) -> None:
    staff = {"op": Identity("operator", "olga"), "view": Identity("viewer", "victor")}
    app = build_app(tmp_path, {}, scheduler_settings=SchedulerSettings(), staff=staff)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://demo") as client:
        assert (await client.get("/admin/downloads/")).status_code == 401
        assert (await client.get(f"{API_PREFIX}/state/history")).status_code == 401
        client.cookies.set(TOKEN_COOKIE, "view")
        page = await client.get("/admin/downloads/")
        assert page.status_code == 200
        assert 'data-role="viewer"' in page.text and 'data-name="victor"' in page.text
        assert 'src="/admin/downloads/static/main.js"' in page.text
        history = (await client.get(f"{API_PREFIX}/state/history")).json()
        assert (history["recording"], history["intervalSeconds"]) == (True, 10.0)
        assert set(history["classes"]) == {"interactive", "release", "bulk", "background"}
        state = (await client.get(f"{API_PREFIX}/state")).json()
        assert state["windows"]["zone"] == "UTC"
        assert "activeSessions" not in state
