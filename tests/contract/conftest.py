"""Fixtures of the port contract suite: one suite, every ``DownloadScheduler``.

Each implementation is a factory in :data:`IMPLEMENTATIONS` taking
``(settings, clock, ticket_keys)`` and returning a scheduler (or an awaitable of one,
for implementations that must connect first). Tests only ever use the async port
methods and the :class:`FakeClock`, so adding an implementation is one more
``pytest.param``. The PostgreSQL implementation gets a fresh migrated schema per test
(every scheduler a test makes shares it, like processes sharing one database) and is
skipped without a database — except under CI, where it must run.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Protocol

import pytest
from _pytest.fixtures import SubRequest
from _pytest.mark.structures import ParameterSet

from arkvory_sched import DownloadScheduler, InMemoryDownloadScheduler, SchedulerSettings
from arkvory_sched.postgres import PostgresScheduler
from arkvory_sched.testing import FakeClock
from tests.pg import drop_schema, new_schema, require_database

SchedulerFactory = Callable[
    [SchedulerSettings, FakeClock, Sequence[bytes]],
    DownloadScheduler | Awaitable[DownloadScheduler],
]

TICKET_KEYS: tuple[bytes, ...] = (b"contract-suite-ticket-key-000001",)


def contract_settings(**changes: object) -> SchedulerSettings:
    """Small limits so that every bound is reached in a few calls; real waits stay short."""
    base = SchedulerSettings(
        sessions=2,
        reserve=0,
        per_principal=2,
        ranges_per_session=2,
        idle_seconds=30.0,
        max_downloads=2,
        transfer_queue_limit=8,
        transfer_queue_per_principal=4,
        transfer_queue_wait_seconds=0.2,
        queue_limit=64,
        queue_per_principal=32,
    )
    return base.with_changes(**changes) if changes else base


def _in_memory(
    settings: SchedulerSettings, clock: FakeClock, ticket_keys: Sequence[bytes]
) -> DownloadScheduler:
    return InMemoryDownloadScheduler(settings, clock=clock, ticket_keys=ticket_keys)


POSTGRES = "postgres"

IMPLEMENTATIONS: list[ParameterSet] = [
    pytest.param(_in_memory, id="memory"),
    pytest.param(POSTGRES, id="postgres"),
]


class MakeScheduler(Protocol):
    """Builds a scheduler of the implementation under test (closed after the test)."""

    async def __call__(
        self,
        settings: SchedulerSettings | None = None,
        *,
        clock: FakeClock | None = None,
        ticket_keys: Sequence[bytes] = TICKET_KEYS,
    ) -> DownloadScheduler: ...


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=IMPLEMENTATIONS)
async def implementation(request: SubRequest) -> AsyncIterator[SchedulerFactory]:
    if request.param != POSTGRES:
        factory: SchedulerFactory = request.param
        yield factory
        return
    url = require_database()
    schema = await new_schema("contract")

    async def connect(
        settings: SchedulerSettings, clock: FakeClock, ticket_keys: Sequence[bytes]
    ) -> DownloadScheduler:
        return await PostgresScheduler.connect(
            url,
            schema=schema,
            settings=settings,
            clock=clock,
            ticket_keys=ticket_keys,
            migrate=False,
            pool_size=4,
        )

    try:
        yield connect
    finally:
        await drop_schema(schema)


@pytest.fixture
async def make_scheduler(
    implementation: SchedulerFactory, clock: FakeClock
) -> AsyncIterator[MakeScheduler]:
    made: list[DownloadScheduler] = []

    shared_clock = clock

    async def make(
        settings: SchedulerSettings | None = None,
        *,
        clock: FakeClock | None = None,
        ticket_keys: Sequence[bytes] = TICKET_KEYS,
    ) -> DownloadScheduler:
        built = implementation(
            settings or contract_settings(), clock or shared_clock, tuple(ticket_keys)
        )
        scheduler = built if isinstance(built, DownloadScheduler) else await built
        made.append(scheduler)
        return scheduler

    yield make
    for scheduler in made:
        await scheduler.close()
    for scheduler in made:
        if isinstance(scheduler, PostgresScheduler):
            await scheduler.disconnect()


@pytest.fixture
async def scheduler(make_scheduler: MakeScheduler) -> DownloadScheduler:
    """A scheduler with :func:`contract_settings` on the test's :class:`FakeClock`."""
    return await make_scheduler()
