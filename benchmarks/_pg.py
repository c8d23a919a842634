"""What a PostgreSQL benchmark needs before it measures anything: the database to use, a
schema of its own that is dropped however the run ends, and a bound on every phase.

A benchmark that hangs on a shared machine holds it for everyone, and one that leaves
its schema behind fills the test database, so both guards live here once.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import sys
import time
from collections.abc import Coroutine, Iterator
from typing import Any, Final, TypeVar

import asyncpg

from arkvory_sched.postgres import apply_migrations, validate_schema

__all__ = [
    "DEFAULT_DSN",
    "DSN_VARIABLE",
    "exit_on_sigterm",
    "log",
    "reach_server",
    "run_async",
    "throwaway_schema",
]

DEFAULT_DSN: Final = "postgresql://postgres@127.0.0.1:5432/test"
DSN_VARIABLE: Final = "ARKVORY_TEST_DATABASE_URL"
PHASE_TIMEOUT_S: Final = 300.0
DROP_RETRY_S: Final = 60.0
SETTINGS: Final = ("shared_buffers", "synchronous_commit", "fsync")

T = TypeVar("T")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run_async(coroutine: Coroutine[Any, Any, T], timeout: float = PHASE_TIMEOUT_S) -> T:
    """``asyncio.run`` with a bound: a phase that hangs fails the run (and its schema is
    still dropped) instead of holding the machine."""
    return asyncio.run(asyncio.wait_for(coroutine, timeout))


def exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)  # unwinds through the phases: schemas are dropped


async def _server_info(dsn: str) -> tuple[str, dict[str, str]]:
    connection = await asyncpg.connect(dsn)
    try:
        version = str(await connection.fetchval("SHOW server_version"))
        values = {name: str(await connection.fetchval(f"SHOW {name}")) for name in SETTINGS}
    finally:
        await connection.close()
    return version, values


def reach_server(dsn: str) -> tuple[str, dict[str, str]] | None:
    """The server's version and the settings that decide commit latency, or None with a
    note on how to point the benchmark at a server."""
    try:
        return run_async(_server_info(dsn), 30)
    except (OSError, asyncpg.PostgresError, TimeoutError) as error:
        log(f"PostgreSQL is not reachable at {dsn}: {error}")
        log(f"Start it, or point ${DSN_VARIABLE} (or --dsn) at a server; see benchmarks/README.md.")
        return None


@contextlib.contextmanager
def throwaway_schema(dsn: str, label: str) -> Iterator[str]:
    """A migrated schema of this run, dropped however the block ends."""
    name = validate_schema(f"arkvory_bench_{label}_{secrets.token_hex(4)}")
    try:
        run_async(apply_migrations(dsn, schema=name), 60)
        yield name
    finally:
        run_async(_drop_schema(dsn, name), DROP_RETRY_S + 30)


async def _drop_schema(dsn: str, name: str) -> None:
    """Drop the schema; while the server restarts (or refuses connections), retry for up
    to a minute, so that a run that failed because of a restart still cleans up."""
    deadline = time.monotonic() + DROP_RETRY_S
    while True:
        try:
            connection = await asyncpg.connect(dsn, timeout=10)
            try:
                await connection.execute(f'DROP SCHEMA IF EXISTS "{validate_schema(name)}" CASCADE')
            finally:
                await connection.close()
            return
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as error:
            if time.monotonic() > deadline:
                log(f"could not drop schema {name}: {error}; drop it by hand")
                raise
            await asyncio.sleep(1.0)
