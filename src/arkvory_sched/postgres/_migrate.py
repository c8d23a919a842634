"""Apply the SQL migrations of ``arkvory_sched.migrations`` to one schema, exactly once.

Every process of a fleet (the writer and each read gateway) may run the migrations at
start-up, so several runners often start at the same moment against an empty database.
They are serialised by a transaction-level advisory lock keyed on the schema name,
taken *before* anything is created: ``CREATE SCHEMA IF NOT EXISTS`` and
``CREATE TABLE IF NOT EXISTS`` are not safe against each other in PostgreSQL (two
sessions can both pass the existence check and one then fails on the catalog's unique
index). Under the lock a runner re-reads what is applied, so a migration that another
runner applied while this one waited is skipped, not run twice.

Each migration runs in its own transaction with ``SET LOCAL search_path`` pointing at
the schema, so the SQL files use unqualified names and one database can hold several
installations (or throwaway test schemas) side by side. A migration and its row in
``schema_migration`` commit together: a failed migration leaves nothing behind and is
retried by the next runner.

The schema holds queue state that rebuilds itself within minutes and is meant to be
excluded from backups (R-PG-5); the runner says so in a ``COMMENT ON SCHEMA`` so that a
DBA looking at the database learns it without reading this code.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Final

import asyncpg

from .._exceptions import MigrationError, SettingsError
from . import _sql as sql
from ._statements import quote_literal

__all__ = [
    "DEFAULT_SCHEMA",
    "MIGRATIONS_PACKAGE",
    "Migration",
    "apply_migrations",
    "load_migrations",
    "pending_migrations",
    "quote_schema",
    "validate_schema",
]

DEFAULT_SCHEMA: Final = "arkvory"
MIGRATIONS_PACKAGE: Final = "arkvory_sched.migrations"

# Lower case only: PostgreSQL folds unquoted names to lower case, so a mixed-case name
# would be a different schema depending on whether a DBA's psql session quotes it.
_SCHEMA_NAME: Final = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_MIGRATION_FILE: Final = re.compile(r"(?P<number>[0-9]{4})_(?P<name>[a-z0-9_]+)\.sql")

_LOCK_NAMESPACE: Final = "arkvory_sched.migrate:"


@dataclass(frozen=True, slots=True)
class Migration:
    """One SQL file: ``version`` is its file name without ``.sql`` (``0001_queue``)."""

    number: int
    version: str
    sql: str


def validate_schema(name: str) -> str:
    """Return ``name`` if it can be used as the schema, else raise :class:`SettingsError`.

    The name is put into SQL text (a schema cannot be a bind parameter), so only plain
    lower-case identifiers are accepted; ``pg_`` is refused up front because PostgreSQL
    reserves it and would only fail later, inside a half-run start-up.
    """
    if not isinstance(name, str) or not _SCHEMA_NAME.fullmatch(name):
        raise SettingsError(
            "schema",
            f"schema name {name!r} is not usable: expected 1 to 63 characters of a-z, 0-9 "
            "and _, not starting with a digit",
        )
    if name.startswith("pg_"):
        raise SettingsError(
            "schema", f"schema name {name!r} is not usable: PostgreSQL reserves the pg_ prefix"
        )
    return name


def quote_schema(name: str) -> str:
    """The validated schema as a quoted identifier, ready to put into SQL text.

    Quoting keeps names that happen to be keywords (``user``, ``order``) working.
    """
    return f'"{validate_schema(name)}"'


def load_migrations() -> tuple[Migration, ...]:
    """Every ``NNNN_name.sql`` shipped in :data:`MIGRATIONS_PACKAGE`, in numeric order.

    Two files with the same number would make the order depend on the file system, so
    they are refused rather than applied in whichever order comes first.
    """
    found: dict[int, Migration] = {}
    for entry in resources.files(MIGRATIONS_PACKAGE).iterdir():
        match = _MIGRATION_FILE.fullmatch(entry.name)
        if match is None or not entry.is_file():
            continue
        number = int(match["number"])
        version = entry.name.removesuffix(".sql")
        if number in found:
            raise MigrationError(
                version, f"{found[number].version}.sql has the same number {match['number']}"
            )
        found[number] = Migration(number, version, entry.read_text(encoding="utf-8"))
    return tuple(found[number] for number in sorted(found))


def _lock_key(schema: str) -> int:
    """A signed 64-bit advisory-lock key: one lock per schema, so schemas don't wait."""
    digest = hashlib.sha256((_LOCK_NAMESPACE + schema).encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


_SCHEMA_COMMENT: Final = (
    "arkvory-sched: the shared download queue (sessions, slot leases, fleet heartbeats), "
    "the operator settings record with its audit trail and the queue-ticket signing key. "
    "Transient state that rebuilds itself within minutes: exclude this schema from backups "
    "(pg_dump --exclude-schema={schema}). After a restore without it, queued clients "
    "queue anew, a new ticket key is made and the settings return to the environment."
)


async def apply_migrations(
    target: str | asyncpg.Connection,
    *,
    schema: str = DEFAULT_SCHEMA,
    on_applied: Callable[[str], None] | None = None,
) -> list[str]:
    """Bring ``schema`` up to date; return the versions applied now (``[]``: up to date).

    ``target`` is a DSN (a connection is opened and closed here) or an open connection.
    ``on_applied`` hears each version as it commits, so that a log shows what was
    applied even when a later migration fails.
    With a connection that is already inside a transaction, the advisory lock is held
    until that outer transaction ends; pass a connection in autocommit state to let
    other runners proceed as soon as each migration commits.
    """
    schema = validate_schema(schema)
    migrations = load_migrations()
    if isinstance(target, str):
        connection = await asyncpg.connect(target)
        try:
            return await _apply(connection, schema, migrations, on_applied)
        finally:
            await connection.close()
    return await _apply(target, schema, migrations, on_applied)


async def pending_migrations(
    target: str | asyncpg.Connection, *, schema: str = DEFAULT_SCHEMA
) -> list[str]:
    """The versions :func:`apply_migrations` would apply now; reads only, creates nothing."""
    schema = validate_schema(schema)
    migrations = load_migrations()
    if isinstance(target, str):
        connection = await asyncpg.connect(target)
        try:
            applied = await _applied_versions(connection, schema)
        finally:
            await connection.close()
    else:
        applied = await _applied_versions(target, schema)
    return [migration.version for migration in migrations if migration.version not in applied]


async def _applied_versions(connection: asyncpg.Connection, schema: str) -> set[str]:
    quoted = quote_schema(schema)
    exists = await connection.fetchval(sql.MIGRATION_TABLE_EXISTS, f"{quoted}.schema_migration")
    if not exists:
        return set()
    rows = await connection.fetch(sql.APPLIED_MIGRATIONS.fill(schema=quoted))
    return {str(row["version"]) for row in rows}


async def _apply(
    connection: asyncpg.Connection,
    schema: str,
    migrations: Sequence[Migration],
    on_applied: Callable[[str], None] | None = None,
) -> list[str]:
    quoted = quote_schema(schema)
    lock = _lock_key(schema)
    async with connection.transaction():
        await connection.execute(sql.LOCK_MIGRATIONS, lock)
        exists = await connection.fetchval(sql.SCHEMA_EXISTS, schema)
        if not exists:
            await connection.execute(sql.CREATE_SCHEMA.fill(schema=quoted))
            comment = quote_literal(_SCHEMA_COMMENT.format(schema=schema))
            await connection.execute(sql.COMMENT_ON_SCHEMA.fill(schema=quoted, comment=comment))
        await connection.execute(sql.CREATE_MIGRATION_TABLE.fill(schema=quoted))
        applied = await _applied_versions(connection, schema)

    done: list[str] = []
    for migration in migrations:
        if migration.version in applied:
            continue
        async with connection.transaction():
            await connection.execute(sql.LOCK_MIGRATIONS, lock)
            # Another runner may have applied it while this one waited for the lock.
            again = await connection.fetchval(
                sql.MIGRATION_APPLIED.fill(schema=quoted), migration.version
            )
            if again:
                continue
            await connection.execute(sql.MIGRATE_IN_SCHEMA.fill(schema=quoted))
            try:
                await connection.execute(migration.sql)
            except asyncpg.PostgresError as error:
                raise MigrationError(migration.version, str(error)) from error
            await connection.execute(sql.RECORD_MIGRATION.fill(schema=quoted), migration.version)
        done.append(migration.version)
        if on_applied is not None:
            on_applied(migration.version)
    return done
