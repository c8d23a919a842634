"""The operator settings record in PostgreSQL: one row, a revision, an audit trail.

The store of a fleet: every process reads the same row, so a change made through any
gateway reaches the whole fleet (each process's :class:`SettingsKeeper` applies it).
The contract is the port's (:class:`SettingsStore`, ADR 0022); what is particular here:

* The compare-and-set is one ``UPDATE … WHERE revision = $expected`` statement
  (R-SET-5): PostgreSQL re-checks the condition on the newest row version after
  waiting for a concurrent writer's row lock, so of two writers that read the same
  revision exactly one succeeds. No update is lost and no transaction or explicit lock
  is needed, which also lets the store run on a pool.
* The applied change's audit row is written by a trigger (migration 0010) inside that
  statement, so a change without its audit row cannot exist. A refused attempt is one
  ``INSERT … SELECT`` that also reads the revision it met and who made it.
* The driver's errors become :class:`SettingsUnavailableError` at the package's one
  boundary to the driver (``_boundary``, :data:`SETTINGS_BOUNDARY`); so does a schema
  without the settings row (never migrated), which no request can change either.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from types import MappingProxyType
from typing import Any, NoReturn

import anyio
import asyncpg

from .._exceptions import SettingsUnavailableError
from ..settings import (
    AuditEntry,
    AuditOutcome,
    SchedulerSettings,
    SettingsStore,
    StoredSettings,
    attempted_json,
    audit_entry,
    check_page,
    decode_record,
)
from . import _sql as sql
from ._boundary import SettingsBoundary
from ._db import Queryable
from ._migrate import DEFAULT_SCHEMA, quote_schema

__all__ = ["SETTINGS_BOUNDARY", "PostgresSettingsStore"]

SETTINGS_BOUNDARY = SettingsBoundary("the settings database cannot be reached")

# A store given a DSN opens a pool of its own, small: an operator's change is rare, and
# the keeper reads once every 10 s.
_OWN_POOL_SIZE = 2
_COMMAND_TIMEOUT_SECONDS = 5.0


class PostgresSettingsStore(SettingsStore):
    """The settings record and its audit trail in the tables of one schema.

    ``database`` is a pool or connection (the caller closes it); a function that
    returns one when the store is used (a scheduler's pool, which exists only once it
    started: :meth:`PostgresScheduler.settings_store`); or a DSN, for which the store
    opens a small pool of its own on first use and closes it in :meth:`close`.
    Opening lazily means a database that is down when the process starts does not
    stop it (R-SET-4). The schema must be migrated (``arkvory-sched migrate``, or a
    writer's start).
    """

    def __init__(
        self,
        database: Queryable | str | Callable[[], Queryable],
        *,
        environment: SchedulerSettings,
        schema: str = DEFAULT_SCHEMA,
    ) -> None:
        self._dsn = database if isinstance(database, str) else None
        self._provider = database if callable(database) else None
        self._database: Queryable | None = None
        if not isinstance(database, str) and not callable(database):
            self._database = database
        self._own_pool: asyncpg.Pool | None = None
        self._opening = anyio.Lock()
        self._environment = environment
        quoted = quote_schema(schema)
        self._table = f"{quoted}.download_settings"
        self._read = sql.READ_SETTINGS.fill(schema=quoted)
        self._save_statement = sql.SAVE_SETTINGS.fill(schema=quoted)
        self._refuse = sql.AUDIT_REFUSAL.fill(schema=quoted)
        self._history = sql.SETTINGS_HISTORY.fill(schema=quoted)

    @property
    def environment(self) -> SchedulerSettings:
        return self._environment

    async def read(self) -> StoredSettings:
        with SETTINGS_BOUNDARY:
            row = await (await self._db()).fetchrow(self._read)
        if row is None:
            self._no_row()
        return _stored(row)

    async def _save(
        self, fields_json: str, updated_by: str, expected_revision: int
    ) -> StoredSettings | None:
        with SETTINGS_BOUNDARY:
            row = await (await self._db()).fetchrow(
                self._save_statement, fields_json, updated_by, expected_revision
            )
        return None if row is None else _stored(row)

    async def history(self, *, limit: int = 50, before: int | None = None) -> list[AuditEntry]:
        check_page(limit, before)
        with SETTINGS_BOUNDARY:
            rows = await (await self._db()).fetch(self._history, limit, before)
        return [
            audit_entry(
                id=int(row["id"]),
                at=row["at"],
                actor=str(row["actor"]),
                outcome=str(row["outcome"]),
                expected_revision=int(row["expected_revision"]),
                revision=int(row["revision"]),
                revision_by=row["revision_by"],
                before=row["before"],
                attempted=row["attempted"],
                detail=row["detail"],
            )
            for row in rows
        ]

    async def close(self) -> None:
        """Close the pool this store opened for a DSN; a pool passed in stays open."""
        pool, self._own_pool = self._own_pool, None
        if pool is not None:
            self._database = None
            await pool.close()

    async def _audit_refusal(
        self,
        outcome: AuditOutcome,
        fields: Mapping[str, object],
        expected_revision: int,
        updated_by: str,
        detail: str | None,
    ) -> tuple[int, str | None]:
        """Audit a refused attempt; the revision the record is at, and who made it."""
        with SETTINGS_BOUNDARY:
            row = await (await self._db()).fetchrow(
                self._refuse,
                updated_by,
                outcome.value,
                expected_revision,
                attempted_json(fields),
                detail,
            )
        if row is None:
            self._no_row()
        by = row["revision_by"]
        return int(row["revision"]), None if by is None else str(by)

    async def _db(self) -> Any:
        """The pool or connection to query (asyncpg's, untyped), opening our own once."""
        if self._provider is not None:
            return self._provider()
        if self._database is not None:
            return self._database
        async with self._opening:
            if self._database is None:
                assert self._dsn is not None
                self._own_pool = await asyncpg.create_pool(
                    self._dsn,
                    min_size=0,
                    max_size=_OWN_POOL_SIZE,
                    command_timeout=_COMMAND_TIMEOUT_SECONDS,
                )
                self._database = self._own_pool
            return self._database

    def _no_row(self) -> NoReturn:
        """An unmigrated schema: a defect of the installation, not of the database."""
        raise SettingsUnavailableError(
            f"{self._table} has no settings row; run `arkvory-sched migrate` on this schema"
        )


def _stored(row: Any) -> StoredSettings:
    updated_at = row["updated_at"]
    updated_by = row["updated_by"]
    return StoredSettings(
        revision=int(row["revision"]),
        fields=MappingProxyType(decode_record(row["fields"])),
        updated_by=None if updated_by is None else str(updated_by),
        updated_at=updated_at if isinstance(updated_at, datetime) else None,
    )
