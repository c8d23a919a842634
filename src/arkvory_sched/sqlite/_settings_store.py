"""The operator settings record in a SQLite file: the embedded default's store.

A single server (the in-memory scheduler) keeps its settings across restarts in one
file beside what it serves, with the standard library's ``sqlite3`` and nothing to
run. The contract is the port's (:class:`SettingsStore`, ADR 0022), and the design
follows the PostgreSQL store: the compare-and-set is one ``UPDATE … WHERE revision =
?`` statement, a trigger writes the applied change's audit row inside it, and a refused
attempt is one ``INSERT … SELECT``. Several processes may share the file (WAL, busy
timeout: :mod:`._database`).

``sqlite3`` blocks, so every call runs in a worker thread (``anyio.to_thread``), never
on the event loop. The store holds one connection, opened on first use (a file that
cannot be opened then does not stop the process, R-SET-4), and lets one thread use it
at a time; concurrent tasks therefore never share a statement, and their
compare-and-sets still race exactly as two processes' do. ``sqlite3`` errors become
:class:`SettingsUnavailableError` here, the store's one boundary to the driver.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any, NoReturn, TypeVar

import anyio

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
from . import _database as db

__all__ = ["SqliteSettingsStore"]

_T = TypeVar("_T")


class SqliteSettingsStore(SettingsStore):
    """The settings record and its audit trail in the SQLite file at ``path``.

    The file (and its directory) is created on first use with the schema; a new
    store object on the same file, in this process or another, sees the same record.
    """

    def __init__(self, path: str | Path, *, environment: SchedulerSettings) -> None:
        self._path = Path(path)
        self._environment = environment
        self._connection: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    @property
    def path(self) -> Path:
        """The settings file."""
        return self._path

    @property
    def environment(self) -> SchedulerSettings:
        return self._environment

    async def read(self) -> StoredSettings:
        rows = await self._run(lambda c: c.execute(db.READ_SETTINGS).fetchall())
        return _stored(rows[0])

    async def _save(
        self, fields_json: str, updated_by: str, expected_revision: int
    ) -> StoredSettings | None:
        # fetchall, never fetchone: a RETURNING statement ends (and commits) only once
        # its rows are read to the end.
        rows = await self._run(
            lambda c: c.execute(
                db.SAVE_SETTINGS, (fields_json, updated_by, expected_revision)
            ).fetchall()
        )
        return _stored(rows[0]) if rows else None

    async def history(self, *, limit: int = 50, before: int | None = None) -> list[AuditEntry]:
        check_page(limit, before)
        rows = await self._run(lambda c: c.execute(db.SETTINGS_HISTORY, (limit, before)).fetchall())
        return [
            audit_entry(
                id=row[0],
                at=datetime.fromisoformat(row[1]),
                actor=row[2],
                outcome=row[3],
                expected_revision=row[4],
                revision=row[5],
                revision_by=row[6],
                before=row[7],
                attempted=row[8],
                detail=row[9],
            )
            for row in rows
        ]

    async def close(self) -> None:
        """Close the connection; the next call opens it again."""

        def close() -> None:
            with self._lock:
                connection, self._connection = self._connection, None
                if connection is not None:
                    connection.close()

        await anyio.to_thread.run_sync(close)

    async def _audit_refusal(
        self,
        outcome: AuditOutcome,
        fields: Mapping[str, object],
        expected_revision: int,
        updated_by: str,
        detail: str | None,
    ) -> tuple[int, str | None]:
        """Audit a refused attempt; the revision the record is at, and who made it."""
        parameters = (updated_by, outcome.value, expected_revision, attempted_json(fields), detail)
        rows = await self._run(lambda c: c.execute(db.AUDIT_REFUSAL, parameters).fetchall())
        revision, by = rows[0]
        return int(revision), by

    async def _run(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        """``work`` on the connection in a worker thread, one thread at a time."""

        def locked() -> _T:
            with self._lock:
                if self._connection is None:
                    self._connection = db.open_database(self._path)
                connection = self._connection
                return db.when_not_busy(lambda: work(connection))

        try:
            return await anyio.to_thread.run_sync(locked)
        except (sqlite3.Error, OSError) as error:
            _unavailable(self._path, error)


def _unavailable(path: Path, error: BaseException) -> NoReturn:
    """The one place sqlite3's errors become the port's (module docstring)."""
    raise SettingsUnavailableError(f"the settings file {path} cannot be used: {error}") from error


def _stored(row: Any) -> StoredSettings:
    revision, fields, updated_by, updated_at = row
    return StoredSettings(
        revision=int(revision),
        fields=MappingProxyType(decode_record(fields)),
        updated_by=updated_by,
        updated_at=None if updated_at is None else datetime.fromisoformat(updated_at),
    )
