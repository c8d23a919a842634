"""The port contract suite on our own stores: the shipped checker, memory and PostgreSQL.

The suite's rule modules ship in ``arkvory_sched.testing.contract`` so that a store
written elsewhere can run them (``arkvory_sched.testing.plugin``); each ``test_*``
module here with the same name runs the shipped one. What is ours alone stays here:
the differential test and the state machine (both stores side by side), and the
settings stores' contract.

Each implementation is a :data:`~arkvory_sched.testing.StoreFactory` in
:data:`IMPLEMENTATIONS` taking ``(settings, clock, ticket_keys)`` and returning a
scheduler not yet started, so adding an implementation is one more ``pytest.param``.
The PostgreSQL implementation gets a fresh migrated schema per test (every scheduler a
test makes shares it, like processes sharing one database) and is skipped without a
database — except under CI, where it must run.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import pytest
from _pytest.fixtures import SubRequest
from _pytest.mark.structures import ParameterSet

from arkvory_sched import DownloadScheduler, InMemoryDownloadScheduler, SchedulerSettings
from arkvory_sched.postgres import PostgresScheduler
from arkvory_sched.testing import FakeClock, StoreFactory
from arkvory_sched.testing.plugin import anyio_backend, clock, make_scheduler, scheduler
from tests.pg import drop_schema, new_schema, require_database

__all__ = [
    "IMPLEMENTATIONS",
    "anyio_backend",
    "arkvory_store_factory",
    "clock",
    "make_scheduler",
    "scheduler",
]


def _in_memory(
    settings: SchedulerSettings, clock: FakeClock, ticket_keys: Sequence[bytes]
) -> DownloadScheduler:
    return InMemoryDownloadScheduler(settings, clock=clock, ticket_keys=ticket_keys)


POSTGRES = "postgres"

IMPLEMENTATIONS: list[ParameterSet] = [
    pytest.param(_in_memory, id="memory"),
    pytest.param(POSTGRES, id="postgres"),
]


@pytest.fixture(params=IMPLEMENTATIONS)
async def arkvory_store_factory(request: SubRequest) -> AsyncIterator[StoreFactory]:
    """Overrides the plugin's factory (named on the command line) with ours."""
    if request.param != POSTGRES:
        factory: StoreFactory = request.param
        yield factory
        return
    url = require_database()
    schema = await new_schema("contract")

    def on_schema(
        settings: SchedulerSettings, clock: FakeClock, ticket_keys: Sequence[bytes]
    ) -> DownloadScheduler:
        return PostgresScheduler.from_dsn(
            url,
            schema=schema,
            settings=settings,
            clock=clock,
            ticket_keys=ticket_keys,
            migrate=False,
            pool_size=4,
        )

    try:
        yield on_schema
    finally:
        await drop_schema(schema)
