"""A simulated crowd on the PostgreSQL store: a throwaway schema, queue time on the
run's :class:`FakeClock`, requests decided one at a time in the order sent. Shared by
the scenarios that run on both stores."""

from __future__ import annotations

from collections.abc import Callable

from arkvory_sched import DownloadScheduler, SchedulerSettings, generate_key
from arkvory_sched.postgres import PostgresScheduler
from arkvory_sched.testing import FakeClock
from tests.pg import drop_schema, new_schema

from .engine import LinkSimulation, RequestTimerLike, SimulationRun

__all__ = ["on_postgres"]

Build = Callable[[RequestTimerLike], DownloadScheduler]


async def on_postgres(
    url: str,
    settings: SchedulerSettings,
    simulation: Callable[[Build, FakeClock], LinkSimulation],
    *,
    prefix: str = "sim",
    wrap: Callable[[DownloadScheduler, FakeClock], DownloadScheduler] | None = None,
) -> SimulationRun:
    """Run the :class:`LinkSimulation` that ``simulation`` makes (from a scheduler
    builder and the clock) on a fresh schema; ``wrap`` may instrument the scheduler."""
    clock = FakeClock()
    key = generate_key()
    schema = await new_schema(prefix)
    built: list[DownloadScheduler] = []

    def build(timer: RequestTimerLike) -> DownloadScheduler:
        scheduler = PostgresScheduler.from_dsn(
            url,
            schema=schema,
            settings=settings,
            clock=clock,
            ticket_keys=[key],
            migrate=False,
            pool_size=4,
            request_timer=timer,
        )
        built.append(scheduler)
        return scheduler if wrap is None else wrap(scheduler, clock)

    try:
        run = simulation(build, clock)
        async with built[0]:
            return await run.run()
    finally:
        await drop_schema(schema)
