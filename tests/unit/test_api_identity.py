"""The operator API's identity rules, without a server: roles, the callable, no default."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.requests import Request

from arkvory_sched import InMemoryDownloadScheduler, SchedulerSettings, api
from arkvory_sched.api import Identity, operator_api
from arkvory_sched.api._body import is_json_media_type
from arkvory_sched.api._identity import identify
from arkvory_sched.api._problems import json_pointer
from arkvory_sched.sqlite import SqliteSettingsStore

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def request() -> Request:
    return Request({"type": "http", "method": "GET", "path": "/", "headers": []})


def test_an_identity_has_a_known_role_and_a_name() -> None:
    assert Identity("operator", "olga").may_write
    assert not Identity("viewer", "victor").may_write
    with pytest.raises(ValueError, match="role"):
        Identity("admin", "root")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="name"):
        Identity("operator", "  ")


async def test_the_callable_may_be_sync_or_async() -> None:
    olga = Identity("operator", "olga")

    async def later(_: Request) -> Identity | None:
        return olga

    assert await identify(lambda _: olga, request()) is olga
    assert await identify(later, request()) is olga
    assert await identify(lambda _: None, request()) is None


async def test_a_callable_answering_anything_else_is_a_type_error() -> None:
    """A bare role string names nobody for the audit: refused, not guessed."""
    with pytest.raises(TypeError, match="Identity or None"):
        await identify(lambda _: "operator", request())  # type: ignore[arg-type,return-value]


def test_the_api_has_no_open_default(tmp_path: Any) -> None:
    settings = SchedulerSettings()
    store = SqliteSettingsStore(tmp_path / "s.sqlite3", environment=settings)
    scheduler = InMemoryDownloadScheduler(settings)
    with pytest.raises(TypeError):
        operator_api(store=store, scheduler=scheduler)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="callable"):
        operator_api(store=store, scheduler=scheduler, authorize="everyone")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "json"),
    [
        ("application/json", True),
        ("Application/JSON; charset=utf-8", True),
        ("application/json-patch+json", False),
        ("text/json", False),
        (None, False),
    ],
)
def test_writes_accept_only_application_json(value: str | None, json: bool) -> None:
    assert is_json_media_type(value) is json


def test_a_field_path_becomes_a_json_pointer() -> None:
    assert json_pointer("classWindows/bulk/windows/0/zone") == "/classWindows/bulk/windows/0/zone"
    assert json_pointer("serviceAccountClasses/a~b") == "/serviceAccountClasses/a~0b"


def test_the_api_exports_exactly_its_all() -> None:
    public = {
        name
        for name, value in vars(api).items()
        if not name.startswith("_") and not getattr(value, "__name__", "").startswith("arkvory_")
    }
    assert public - {"annotations"} == set(api.__all__)
