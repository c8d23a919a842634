"""What the contract suite builds its schedulers from, without pytest.

A store under test is a :data:`StoreFactory`: called with the test's settings, its
:class:`FakeClock` and the ticket keys, it returns a scheduler that is built but not
started (or an awaitable of one). The suite starts each scheduler it makes and, after
the test, closes every one and then disconnects every one — the port's lifecycle, so a
store that leaks a connection or a task on the way out shows it in its own test run.

A second scheduler made in one test stands for a restart, or, on a store whose queue
is :attr:`~arkvory_sched.DownloadScheduler.shared`, for another process on the same
queue: the factory must give every scheduler of one test the same store, and each test
a store of its own.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Final, Protocol

from .._port import DownloadScheduler
from ..settings import SchedulerSettings
from ._clock import FakeClock

__all__ = [
    "TICKET_KEYS",
    "MakeScheduler",
    "StoreFactory",
    "contract_schedulers",
    "contract_settings",
    "load_store_factory",
]

StoreFactory = Callable[
    [SchedulerSettings, FakeClock, Sequence[bytes]],
    DownloadScheduler | Awaitable[DownloadScheduler],
]
"""``factory(settings, clock, ticket_keys)``: a scheduler of the store under test, not
yet started (or an awaitable of one, for a store that must prepare something first)."""

TICKET_KEYS: Final[tuple[bytes, ...]] = (b"contract-suite-ticket-key-000001",)


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


class MakeScheduler(Protocol):
    """Builds and starts a scheduler of the store under test (closed after the test)."""

    async def __call__(
        self,
        settings: SchedulerSettings | None = None,
        *,
        clock: FakeClock | None = None,
        ticket_keys: Sequence[bytes] = TICKET_KEYS,
    ) -> DownloadScheduler: ...


def load_store_factory(spec: str) -> StoreFactory:
    """The factory named ``module:attribute`` (``mystore.testing:make_scheduler``)."""
    module_name, colon, attribute = spec.partition(":")
    if not colon or not module_name or not attribute:
        raise ValueError(f"a store factory is named module:attribute, not {spec!r}")
    factory: object = importlib.import_module(module_name)
    for part in attribute.split("."):
        factory = getattr(factory, part)
    if not callable(factory):
        raise TypeError(f"{spec} is not callable: {factory!r}")
    return factory  # its signature is the caller's promise: checked by the tests it runs


@asynccontextmanager
async def contract_schedulers(
    factory: StoreFactory, clock: FakeClock
) -> AsyncIterator[MakeScheduler]:
    """A :class:`MakeScheduler` for one test: every scheduler it made is closed, then
    disconnected, when the block ends."""
    made: list[DownloadScheduler] = []
    shared_clock = clock

    async def make(
        settings: SchedulerSettings | None = None,
        *,
        clock: FakeClock | None = None,
        ticket_keys: Sequence[bytes] = TICKET_KEYS,
    ) -> DownloadScheduler:
        built = factory(settings or contract_settings(), clock or shared_clock, tuple(ticket_keys))
        scheduler = built if isinstance(built, DownloadScheduler) else await built
        made.append(scheduler)
        await scheduler.start()
        return scheduler

    yield make
    for scheduler in made:
        await scheduler.close()
    for scheduler in made:
        await scheduler.disconnect()
