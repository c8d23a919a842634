"""PostgreSQL for tests: where it is, whether it answers, and throwaway schemas.

Tests that need PostgreSQL call :func:`require_database` (the ``database_url`` fixture
of ``tests/postgres/conftest.py`` does). On a developer machine without the database
they are skipped with the reason; under CI (``CI=true``) they fail instead, because a
suite that silently skips its storage tests would report green for code it never ran.

Each test works in a schema of its own with a random name, so tests can run in
parallel against one database and a failed run leaves nothing that disturbs the next.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Final

import asyncpg
import pytest

from arkvory_sched.postgres import apply_migrations, validate_schema
from arkvory_sched.postgres._cli import where

__all__ = [
    "DATABASE_URL_VARIABLE",
    "DEFAULT_DATABASE_URL",
    "connect",
    "database_url",
    "drop_schema",
    "new_schema",
    "require_database",
    "schema_name",
    "throwaway_schema",
]

DATABASE_URL_VARIABLE: Final = "ARKVORY_TEST_DATABASE_URL"
DEFAULT_DATABASE_URL: Final = "postgresql://postgres@127.0.0.1:5432/test"
_PROBE_TIMEOUT_SECONDS: Final = 3.0

# url -> None when it answered, else the one-line reason it did not.
_probed: dict[str, str | None] = {}


def database_url() -> str:
    """The test database: ``$ARKVORY_TEST_DATABASE_URL`` or the local default."""
    return os.environ.get(DATABASE_URL_VARIABLE) or DEFAULT_DATABASE_URL


def require_database() -> str:
    """The test database's URL; skips the test (fails it under CI) when it is down.

    The check runs once per process and URL: a suite with hundreds of database tests
    should not wait for hundreds of connection timeouts when the server is missing.
    """
    url = database_url()
    if url not in _probed:
        _probed[url] = _probe(url)
    reason = _probed[url]
    if reason is not None:
        message = f"PostgreSQL not reachable at {where(url)}: {reason}"
        if os.environ.get("CI") == "true":
            pytest.fail(
                f"{message} (under CI the PostgreSQL tests must run; start the server or "
                f"set {DATABASE_URL_VARIABLE})",
                pytrace=False,
            )
        pytest.skip(message)
    return url


def _probe(url: str) -> str | None:
    async def check() -> None:
        connection = await asyncpg.connect(url, timeout=_PROBE_TIMEOUT_SECONDS)
        try:
            await connection.fetchval("SELECT 1", timeout=_PROBE_TIMEOUT_SECONDS)
        finally:
            await connection.close()

    outcome: list[str | None] = []

    def run() -> None:
        # A thread of its own, so the probe works even when the caller is inside a
        # running event loop (an async fixture), where asyncio.run would refuse.
        try:
            asyncio.run(asyncio.wait_for(check(), _PROBE_TIMEOUT_SECONDS))
        except Exception as error:
            text = " ".join(str(error).split()) or type(error).__name__
            outcome.append(f"{type(error).__name__}: {text}")
        else:
            outcome.append(None)

    thread = threading.Thread(target=run, name="postgres-probe", daemon=True)
    thread.start()
    thread.join(_PROBE_TIMEOUT_SECONDS + 2.0)
    if not outcome:
        return f"no answer within {_PROBE_TIMEOUT_SECONDS:g} s"
    return outcome[0]


async def connect(url: str | None = None) -> asyncpg.Connection:
    """A new connection to the test database (the caller closes it)."""
    return await asyncpg.connect(url or database_url(), timeout=_PROBE_TIMEOUT_SECONDS)


def schema_name(prefix: str = "t") -> str:
    """A fresh, unused schema name such as ``arkvory_t_3f9c…``; creates nothing."""
    return validate_schema(f"arkvory_{prefix}_{secrets.token_hex(6)}")


async def new_schema(prefix: str = "t", *, migrate: bool = True) -> str:
    """A unique throwaway schema, migrated unless ``migrate=False`` (then not created)."""
    name = schema_name(prefix)
    if migrate:
        await apply_migrations(database_url(), schema=name)
    return name


async def drop_schema(name: str) -> None:
    """Drop a throwaway schema and everything in it; a missing schema is fine."""
    connection = await connect()
    try:
        await connection.execute(f'DROP SCHEMA IF EXISTS "{validate_schema(name)}" CASCADE')
    finally:
        await connection.close()


@asynccontextmanager
async def throwaway_schema(prefix: str = "t", *, migrate: bool = True) -> AsyncIterator[str]:
    """``async with throwaway_schema() as schema:`` — dropped however the block ends."""
    name = await new_schema(prefix, migrate=migrate)
    try:
        yield name
    finally:
        await drop_schema(name)
