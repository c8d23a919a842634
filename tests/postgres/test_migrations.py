"""The migration runner: order, exactly-once, and many runners starting together."""

from __future__ import annotations

import asyncio
import time
from importlib import resources

import asyncpg
import pytest

from arkvory_sched import SettingsError
from arkvory_sched.postgres import (
    DEFAULT_SCHEMA,
    MigrationError,
    apply_migrations,
    pending_migrations,
    validate_schema,
)
from arkvory_sched.postgres._migrate import (
    MIGRATIONS_PACKAGE,
    Migration,
    _apply,
    load_migrations,
)
from tests.pg import connect, drop_schema, schema_name

pytestmark = pytest.mark.anyio

RUNNERS = 16
VERSIONS = [migration.version for migration in load_migrations()]
TABLES = {
    "schema_migration",
    "download_slot",
    "download_session",
    "principal_round",
    "class_state",
    "queue_state",
    "fleet_node",
    "queue_leader",
    "download_settings",
    "download_settings_audit",
    "arkvory_download_ticket_key",
    "queue_admitted",
    "queue_expired",
    "principal_load",
    "principal_completed",
    "principal_expired",
}


def test_sql_files_are_found_as_package_resources() -> None:
    names = sorted(entry.name for entry in resources.files(MIGRATIONS_PACKAGE).iterdir())
    sql = [name for name in names if name.endswith(".sql")]
    assert sql == [f"{version}.sql" for version in VERSIONS]
    assert VERSIONS[:2] == ["0001_queue", "0002_settings_and_ticket_key"]
    numbers = [migration.number for migration in load_migrations()]
    assert numbers == sorted(numbers)
    assert "CREATE TABLE download_settings" in load_migrations()[1].sql


@pytest.mark.parametrize("name", ["arkvory", "_x", "a" * 63, "user", "t_0"])
def test_plain_lower_case_schema_names_are_accepted(name: str) -> None:
    assert validate_schema(name) == name


@pytest.mark.parametrize(
    "name", ["", "Arkvory", "1abc", "a-b", 'a"b', "a b", "a" * 64, "pg_temp", "ärk"]
)
def test_other_schema_names_are_refused_naming_the_schema(name: str) -> None:
    with pytest.raises(SettingsError) as caught:
        validate_schema(name)
    assert caught.value.field == "schema"
    assert repr(name) in str(caught.value)


def test_the_default_schema_is_arkvory() -> None:
    assert DEFAULT_SCHEMA == "arkvory"


async def _recorded(schema: str) -> list[tuple[str, int]]:
    """(version, row count) from schema_migration, in application order."""
    connection = await connect()
    try:
        rows = await connection.fetch(
            f'SELECT version, count(*) OVER (PARTITION BY version) AS n FROM "{schema}".'
            "schema_migration ORDER BY applied_at, version"
        )
    finally:
        await connection.close()
    return [(str(row["version"]), int(row["n"])) for row in rows]


async def _tables(schema: str) -> set[str]:
    connection = await connect()
    try:
        rows = await connection.fetch(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = $1", schema
        )
    finally:
        await connection.close()
    return {str(row["table_name"]) for row in rows}


async def test_applies_every_migration_in_order_once(database_url: str) -> None:
    schema = schema_name("m")
    try:
        assert await pending_migrations(database_url, schema=schema) == VERSIONS
        assert await apply_migrations(database_url, schema=schema) == VERSIONS
        assert await _recorded(schema) == [(version, 1) for version in VERSIONS]
        assert await _tables(schema) >= TABLES

        assert await apply_migrations(database_url, schema=schema) == []
        assert await pending_migrations(database_url, schema=schema) == []
        assert await _recorded(schema) == [(version, 1) for version in VERSIONS]
    finally:
        await drop_schema(schema)


async def test_the_schema_says_it_is_excluded_from_backups(schema: str) -> None:
    connection = await connect()
    try:
        comment = await connection.fetchval(
            "SELECT obj_description(oid, 'pg_namespace') FROM pg_namespace WHERE nspname = $1",
            schema,
        )
    finally:
        await connection.close()
    assert isinstance(comment, str)
    assert f"--exclude-schema={schema}" in comment
    assert "backups" in comment


async def test_applies_on_an_open_connection_and_leaves_it_usable(database_url: str) -> None:
    schema = schema_name("m")
    connection = await connect()
    try:
        assert await apply_migrations(connection, schema=schema) == VERSIONS
        # search_path was set LOCAL to each migration's transaction: unchanged here.
        assert DEFAULT_SCHEMA not in str(await connection.fetchval("SHOW search_path"))
        assert schema not in str(await connection.fetchval("SHOW search_path"))
        assert not connection.is_in_transaction()
    finally:
        await connection.close()
        await drop_schema(schema)


async def test_sixteen_runners_started_together_apply_each_migration_once(
    database_url: str,
) -> None:
    schema = schema_name("m")
    connections = [await connect() for _ in range(RUNNERS)]
    start = asyncio.Event()

    async def runner(connection: asyncpg.Connection) -> list[str]:
        await start.wait()
        return await apply_migrations(connection, schema=schema)

    try:
        tasks = [asyncio.create_task(runner(connection)) for connection in connections]
        await asyncio.sleep(0.05)  # every runner is parked on the event
        began = time.perf_counter()
        start.set()
        results = await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - began

        applied = sorted(version for result in results for version in result)
        assert applied == VERSIONS, f"{RUNNERS} runners applied {applied}"
        assert sum(1 for result in results if result) >= 1
        assert await _recorded(schema) == [(version, 1) for version in VERSIONS]
        assert await _tables(schema) >= TABLES
        print(
            f"\n{RUNNERS} concurrent runners: {len(VERSIONS)} migrations applied once each, "
            f"{sum(1 for result in results if not result)} runners found them done, "
            f"{elapsed * 1000:.0f} ms"
        )
    finally:
        for connection in connections:
            await connection.close()
        await drop_schema(schema)


async def test_runners_on_different_schemas_do_not_share_state(database_url: str) -> None:
    first, second = schema_name("m"), schema_name("m")
    try:
        results = await asyncio.gather(
            apply_migrations(database_url, schema=first),
            apply_migrations(database_url, schema=second),
        )
        assert list(results) == [VERSIONS, VERSIONS]
    finally:
        await drop_schema(first)
        await drop_schema(second)


async def test_a_failing_migration_keeps_nothing_and_is_retried_next_time(
    database_url: str,
) -> None:
    schema = schema_name("m")
    good = Migration(1, "0001_good", "CREATE TABLE first_table (x int);")
    bad = Migration(2, "0002_bad", "CREATE TABLE second_table (x int); SELEC 1;")
    fixed = Migration(2, "0002_bad", "CREATE TABLE second_table (x int);")
    connection = await connect()
    try:
        with pytest.raises(MigrationError) as caught:
            await _apply(connection, schema, [good, bad])
        assert caught.value.version == "0002_bad"
        assert "SELEC" in str(caught.value)
        assert await _recorded(schema) == [("0001_good", 1)]
        assert "second_table" not in await _tables(schema)
        assert not connection.is_in_transaction()

        assert await _apply(connection, schema, [good, fixed]) == ["0002_bad"]
        assert await _tables(schema) >= {"first_table", "second_table"}
    finally:
        await connection.close()
        await drop_schema(schema)
