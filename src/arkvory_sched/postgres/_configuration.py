"""Applying new settings to one process and to the shared queue, and their store.

An operator's change reaches every process through its keeper (ADR 0022), which calls
``configure``: the process takes the settings in force, the database gets the slots
they need, and a change of strategy or aging gives every waiter its new place.
"""

from __future__ import annotations

import asyncpg

from .._early_polls import EarlyPolls
from ..policy import smallest_first_key
from ..settings import SchedulerSettings, Strategy
from . import _sql as sql
from ._boundary import Connections
from ._leader_sizing import FleetSizing
from ._running import Running
from ._settings_store import PostgresSettingsStore

__all__ = ["REKEY_BATCH", "Configuration"]

# Waiters given a new key per statement on a switch to smallest-first: a long queue is
# rekeyed in batches, so neither the process nor one statement holds all of it.
REKEY_BATCH = 10_000


class Configuration:
    """``configure()`` and ``settings_store()`` of :class:`PostgresScheduler`."""

    def __init__(
        self,
        running: Running,
        connections: Connections,
        early: EarlyPolls,
        *,
        environment: SchedulerSettings,
        schema: str,
    ) -> None:
        self._running = running
        self._connections = connections
        self._early = early
        self._environment = environment
        self._schema = schema

    def settings_store(self) -> PostgresSettingsStore:
        """The settings store of this scheduler's schema, on its pool, validating
        against the environment it started with: the store a process's keeper reads
        (ADR 0022) without connections of its own. Usable once ``start()`` ran."""
        return PostgresSettingsStore(
            self._connections.require_pool, environment=self._environment, schema=self._schema
        )

    async def configure(self, settings: SchedulerSettings) -> None:
        """Run on ``settings`` from now on. Raises :class:`StoreUnavailableError` when
        the database cannot take the change (the keeper tries again)."""
        running = self._running
        current = running.settings
        settings = settings.keeping_environment_only(current)
        running.configured = running.settings = settings
        self._early.clear()  # the next poll of every waiter is decided anew (R-STRAT-4)
        async with self._connections.acquire() as conn:
            await conn.execute(sql.ENSURE_SLOTS, settings.sessions)  # the most, if automatic
            running.take(await FleetSizing.in_force(conn, settings))
            await conn.execute(sql.ANALYZE_SLOTS)
            if (
                settings.strategy is not current.strategy
                or settings.aging_minutes != current.aging_minutes
            ):
                await self._rekey(conn, settings)
        running.invalidate()

    async def _rekey(self, conn: asyncpg.Connection, settings: SchedulerSettings) -> None:
        """A new strategy orders the waiters anew, by arrival (O(n), only on change), as
        the in-memory queue re-adds them: the smallest-first key, or under ``ordered``
        each waiter's round-robin turn again (``REKEY_ROUND_TAGS``, migration 0007)."""
        if settings.strategy is not Strategy.SMALLEST_FIRST:
            await conn.execute(sql.REKEY_ROUND_TAGS)
            return
        aging = settings.aging_minutes * 60.0
        after = b""
        async with conn.transaction():
            while rows := await conn.fetch(sql.WAITING_FOR_REKEY, after, REKEY_BATCH):
                keys = [row["session_key"] for row in rows]
                order = [
                    smallest_first_key(row["object_size"], row["arrival"], aging) for row in rows
                ]
                await conn.execute(sql.REKEY_WAITING, keys, order)
                after = keys[-1]
            await conn.execute(sql.FORGET_ALL_ROUNDS)
