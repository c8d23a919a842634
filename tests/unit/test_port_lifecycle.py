"""The port's lifecycle: ``async with`` starts, closes and disconnects any store.

Hosts (the demo, the middleware, the contract suite) no longer ask which store they
hold; these tests pin the order of the three calls, the defaults a store without
anything to connect inherits, and the middleware's part in its lifespan.
"""

from __future__ import annotations

import anyio
import pytest

from arkvory_sched import (
    DownloadRequest,
    DownloadSchedulerMiddleware,
    InMemoryDownloadScheduler,
    PrincipalKind,
    Rejected,
    RejectReason,
    SchedulerSettings,
    SettingsStore,
)
from arkvory_sched.asgi._asgi import Message, Receive, Scope, Send
from arkvory_sched.postgres import PostgresScheduler
from arkvory_sched.testing import FakeClock

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Recording(InMemoryDownloadScheduler):
    """The in-memory store, noting each lifecycle call."""

    def __init__(self, calls: list[str]) -> None:
        super().__init__(SchedulerSettings(), clock=FakeClock(), ticket_keys=[b"k" * 32])
        self.calls = calls

    async def start(self) -> None:
        self.calls.append("start")

    async def close(self) -> None:
        self.calls.append("close")
        await super().close()

    async def disconnect(self) -> None:
        self.calls.append("disconnect")


def request() -> DownloadRequest:
    return DownloadRequest(
        principal="ci",
        principal_kind=PrincipalKind.SERVICE,
        object_id="big.iso",
        object_size=1 << 30,
        download_id="dl-1",
        client_address="192.0.2.1",
    )


async def test_async_with_starts_then_closes_then_disconnects() -> None:
    calls: list[str] = []
    async with Recording(calls) as scheduler:
        assert calls == ["start"]
        assert isinstance(scheduler, Recording)
    assert calls == ["start", "close", "disconnect"]


async def test_async_with_closes_even_when_the_host_is_cancelled() -> None:
    calls: list[str] = []
    with anyio.CancelScope() as scope:
        async with Recording(calls):
            scope.cancel()
            await anyio.sleep(1)
    assert calls == ["start", "close", "disconnect"]


async def test_a_store_with_nothing_to_connect_takes_the_defaults() -> None:
    scheduler = InMemoryDownloadScheduler(SchedulerSettings(), ticket_keys=[b"k" * 32])
    assert not scheduler.shared
    assert scheduler.settings_store() is None
    async with scheduler:
        pass
    refused = await scheduler.admit(request())
    assert isinstance(refused, Rejected)
    assert refused.reason is RejectReason.SHUTTING_DOWN
    await scheduler.disconnect()  # a second disconnect is a no-op


def test_the_postgres_store_says_it_is_shared_and_offers_its_settings_store() -> None:
    scheduler = PostgresScheduler.from_dsn("postgresql://nobody@127.0.0.1:1/none")
    assert scheduler.shared  # built, not connected: nothing above opened a connection
    assert isinstance(scheduler.settings_store(), SettingsStore)


async def test_the_middleware_runs_the_lifecycle_around_the_apps_lifespan() -> None:
    calls: list[str] = []
    scheduler = Recording(calls)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            calls.append(f"app: {message['type']}")
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            else:
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def no_target(scope: Scope) -> None:
        return None

    middleware = DownloadSchedulerMiddleware(app, scheduler=scheduler, resolver=no_target)
    to_app, from_server = anyio.create_memory_object_stream[Message](4)

    async def send(message: Message) -> None:
        calls.append(f"server: {message['type']}")

    scope: Scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}
    with to_app, from_server, anyio.fail_after(5):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(middleware, scope, from_server.receive, send)
            await to_app.send({"type": "lifespan.startup"})
            await to_app.send({"type": "lifespan.shutdown"})
    assert calls == [
        "start",
        "app: lifespan.startup",
        "server: lifespan.startup.complete",
        "close",
        "app: lifespan.shutdown",
        "disconnect",
        "server: lifespan.shutdown.complete",
    ]
