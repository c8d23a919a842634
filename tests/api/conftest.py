"""Fixtures of the operator API tests: the API on a real uvicorn server, a real store.

:class:`ApiServer` runs uvicorn on a free 127.0.0.1 port in a thread with an event loop
of its own, serving the API mounted at ``/api/v1/system/downloads`` beside nothing
else; the settings store is a real one (PostgreSQL in a throwaway schema, or SQLite in
a temporary file) and a :class:`SettingsKeeper` applies the record to an in-memory
scheduler, as a host would wire them. Tests talk HTTP to it with httpx, and may run a
coroutine on the server's loop (:meth:`ApiServer.call`) to put sessions in its queue.

:meth:`ApiServer.restart` builds a new store, scheduler and keeper on the same file or
schema: what survives is only what the store kept. :class:`DemoApi` is the other
way in: the demo server (``arkvory-demo serve``) as a process of its own, with the API
mounted as a user runs it — for restarts, several processes, and the heaviest load.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final, TypeVar

import anyio
import httpx
import pytest
import uvicorn
from _pytest.fixtures import SubRequest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Mount

from arkvory_sched import InMemoryDownloadScheduler, SchedulerSettings, SettingsKeeper
from arkvory_sched.api import API_PREFIX, Identity, operator_api
from arkvory_sched.postgres import PostgresSettingsStore
from arkvory_sched.settings._store import SettingsStore
from arkvory_sched.testing import FakeClock
from tests.integration.conftest import DemoServer
from tests.pg import drop_schema, new_schema, require_database

T = TypeVar("T")
HOST: Final = "127.0.0.1"
STARTUP_SECONDS: Final = 15.0

OPERATOR_TOKEN: Final = "op-olga"
SECOND_OPERATOR_TOKEN: Final = "op-oscar"
VIEWER_TOKEN: Final = "view-victor"
STAFF: Final[Mapping[str, Identity]] = {
    OPERATOR_TOKEN: Identity("operator", "olga"),
    SECOND_OPERATOR_TOKEN: Identity("operator", "oscar"),
    VIEWER_TOKEN: Identity("viewer", "victor"),
}

#: The environment of the server: eight slots, so the derived reserve is 1 and the
#: derived share 2 (R-SET-2 has something to lower).
# The link's rate configured, as an operator should (ADR 0034): the forecasts and
# estimates the API shows rest on it from the first answer.
ENVIRONMENT: Final = SchedulerSettings(sessions=8, bandwidth=40_000_000)

StoreFactory = Callable[[SchedulerSettings], SettingsStore]


WRITER_TOKEN_PREFIX: Final = "writer-"


async def authorize(request: Request) -> Identity | None:
    """The host's check, async as a database lookup would be: a bearer token of staff;
    ``writer-N`` tokens are operators named after themselves (the concurrency test)."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer":
        return None
    if token.startswith(WRITER_TOKEN_PREFIX) and token[len(WRITER_TOKEN_PREFIX) :].isdigit():
        return Identity("operator", token)
    return STAFF.get(token)


def headers(token: str | None = OPERATOR_TOKEN, **extra: str) -> dict[str, str]:
    """What a tool sends with a write: credentials, JSON, and the anti-CSRF header."""
    sent = {"content-type": "application/json", "arkvory-request": "1"}
    if token is not None:
        sent["authorization"] = f"Bearer {token}"
    sent.update({name.replace("_", "-"): value for name, value in extra.items()})
    return sent


class ApiServer:
    """The operator API on uvicorn in a thread; see the module docstring."""

    def __init__(self, make_store: StoreFactory, environment: SchedulerSettings) -> None:
        self._make_store = make_store
        self._environment = environment
        self.port = 0  # the running server's port, chosen by the system at each start
        self.clock = FakeClock(wall=time.time())
        self.scheduler: InMemoryDownloadScheduler | None = None
        self.keeper: SettingsKeeper | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}{API_PREFIX}"

    def url(self, path: str) -> str:
        return self.base_url + path

    def start(self) -> None:
        assert self._thread is None, "already running"
        store = self._make_store(self._environment)
        scheduler = InMemoryDownloadScheduler(self._environment, clock=self.clock)
        keeper = SettingsKeeper(store, scheduler)
        self.scheduler, self.keeper = scheduler, keeper

        @asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[None]:
            async with anyio.create_task_group() as tasks:
                await tasks.start(keeper.run)
                yield
                tasks.cancel_scope.cancel()
            await store.close()

        api = operator_api(store=store, scheduler=scheduler, authorize=authorize, keeper=keeper)
        app = Starlette(routes=[Mount(API_PREFIX, app=api)], lifespan=lifespan)
        # Bound here, on a port of the system's choosing, and handed to uvicorn: no port
        # is picked beforehand that another process could take first.
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind((HOST, 0))
        self.port = listener.getsockname()[1]
        config = uvicorn.Config(app, log_level="warning", lifespan="on")
        self._server = server = uvicorn.Server(config)

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(server.serve(sockets=[listener]))
            except BaseException as error:
                self._failure = error
            finally:
                loop.close()
                listener.close()

        self._thread = threading.Thread(target=run, name=f"api-{self.port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + STARTUP_SECONDS
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the API server did not start: {self._failure!r}")
            time.sleep(0.02)

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(STARTUP_SECONDS)
            assert not self._thread.is_alive(), "the API server did not stop"
        self._server = self._thread = self._loop = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the server's loop (where its scheduler lives)."""
        assert self._loop is not None, "the server is not running"
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(30.0)


def _postgres_store(url: str, schema: str) -> StoreFactory:
    def make(environment: SchedulerSettings) -> SettingsStore:
        return PostgresSettingsStore(url, environment=environment, schema=schema)

    return make


def _sqlite_store(path: Path) -> StoreFactory:
    def make(environment: SchedulerSettings) -> SettingsStore:
        from arkvory_sched.sqlite import SqliteSettingsStore  # noqa: PLC0415

        return SqliteSettingsStore(path, environment=environment)

    return make


STORES = [pytest.param("sqlite", id="sqlite"), pytest.param("postgres", id="postgres")]


@pytest.fixture(params=STORES)
def store_factory(request: SubRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """A factory of stores on one file or schema: every store it makes sees one record."""
    if request.param == "sqlite":
        yield _sqlite_store(tmp_path / "settings.sqlite3")
        return
    url = require_database()
    schema = asyncio.run(new_schema("api"))
    try:
        yield _postgres_store(url, schema)
    finally:
        asyncio.run(drop_schema(schema))


@pytest.fixture
def api_server(store_factory: StoreFactory) -> Iterator[ApiServer]:
    server = ApiServer(store_factory, ENVIRONMENT)
    server.start()
    try:
        yield server
    finally:
        server.stop()


# --- the demo server as a process ------------------------------------------------------


class DemoApi(DemoServer):
    """``arkvory-demo serve`` as a subprocess, with staff tokens for its operator API:
    the two of :data:`STAFF` (the variables) and ``writers`` more operators named
    ``writer-N`` (options). With ``schema`` its queue and settings are PostgreSQL's
    (``ARKVORY_DATABASE_URL`` in ``env``), else SQLite's file in the served directory.
    """

    def __init__(
        self,
        root: Path,
        log_path: Path,
        *,
        env: Mapping[str, str],
        schema: str | None = None,
        writers: int = 0,
    ) -> None:
        staff_env = {
            "ARKVORY_DEMO_OPERATOR_TOKEN": f"{OPERATOR_TOKEN}=olga",
            "ARKVORY_DEMO_VIEWER_TOKEN": f"{VIEWER_TOKEN}=victor",
        }
        super().__init__(root, log_path, env={**staff_env, **env}, bandwidth=None, tokens=())
        extra = ["--schema", schema] if schema is not None else []
        for n in range(writers):
            extra += ["--operator-token", f"{WRITER_TOKEN_PREFIX}{n}=writer-{n}"]
        if writers:
            extra += ["--operator-token", f"{OPERATOR_TOKEN}=olga"]
        self._argv += extra

    @property
    def api_url(self) -> str:
        return f"{self.base_url}{API_PREFIX}"


class StartDemo:
    """Starts demo processes on one store (``store``: ``sqlite`` or ``postgres``); all
    share the served directory (SQLite file) or the schema (PostgreSQL)."""

    def __init__(self, store: str, root: Path, logs: Path) -> None:
        self.store = store
        self._root = root
        self._logs = logs
        self._schema: str | None = None
        self._env: dict[str, str] = {}
        self.started: list[DemoApi] = []
        if store == "postgres":
            url = require_database()
            self._schema = asyncio.run(new_schema("api_demo"))
            self._env = {"ARKVORY_DATABASE_URL": url}

    def __call__(self, *, writers: int = 0, env: Mapping[str, str] | None = None) -> DemoApi:
        log = self._logs / f"demo-{len(self.started)}.log"
        server = DemoApi(
            self._root,
            log,
            env={**self._env, **(env or {})},
            schema=self._schema,
            writers=writers,
        )
        self.started.append(server)
        server.start()
        return server

    def close(self) -> None:
        for server in self.started:
            server.stop()
        if self._schema is not None:
            asyncio.run(drop_schema(self._schema))


@pytest.fixture(params=STORES)
def start_demo(request: SubRequest, tmp_path: Path) -> Iterator[StartDemo]:
    root = tmp_path / "served"
    root.mkdir()
    starter = StartDemo(request.param, root, tmp_path)
    try:
        yield starter
    finally:
        starter.close()


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10.0) as http:
        yield http
