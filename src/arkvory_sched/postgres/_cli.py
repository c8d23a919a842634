"""``arkvory-sched``: administrative commands for the PostgreSQL queue.

``arkvory-sched migrate`` creates the schema and applies the migrations. Processes
apply them at start-up as well, but a deployment that runs its application with a
role without DDL rights (or wants the schema in place before the first rollout) runs
this step once with a privileged role. It is safe to run from several places at once.

Exit codes: 0 success (including "up to date"), 1 the database could not be reached or
a migration failed, 2 bad usage (no DSN, a DSN that is not a usable PostgreSQL URL, a
bad schema name). Errors are one line on stderr without a traceback: this runs in
deployment pipelines, where a traceback hides the one line that matters. The DSN is
never printed, because it may carry a password.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from typing import Final
from urllib.parse import parse_qs, urlsplit

import asyncpg

from .._exceptions import MigrationError, SettingsError
from .._version import installed_version
from ._migrate import DEFAULT_SCHEMA, apply_migrations, validate_schema

__all__ = ["DSN_VARIABLE", "build_parser", "main"]

PROG: Final = "arkvory-sched"
DSN_VARIABLE: Final = "ARKVORY_DATABASE_URL"
EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2

_CONNECT_TIMEOUT_SECONDS: Final = 10.0
_SCHEMES: Final = frozenset({"postgres", "postgresql"})


class _ConnectError(Exception):
    """The database could not be reached; the message names where we tried."""


class _DsnError(Exception):
    """asyncpg refused the DSN itself (an unknown ``sslmode``, say): a usage error."""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (separate so that tests and docs can inspect it)."""
    parser = argparse.ArgumentParser(
        prog=PROG, description="Administer the PostgreSQL download queue of arkvory-sched."
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {installed_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    migrate = commands.add_parser(
        "migrate",
        help="create the schema and apply pending migrations",
        description=(
            "Create the schema if needed and apply every pending migration, each exactly "
            "once; safe to run from several processes at once."
        ),
    )
    migrate.add_argument(
        "--dsn",
        default=None,
        help=f"PostgreSQL URL, postgresql://user@host:port/db (default: ${DSN_VARIABLE})",
    )
    migrate.add_argument(
        "--schema",
        default=DEFAULT_SCHEMA,
        help=f"schema holding the queue tables (default: {DEFAULT_SCHEMA})",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code instead of exiting (for tests)."""
    parser = build_parser()
    arguments = parser.parse_args(argv)
    stderr = sys.stderr
    dsn: str | None = arguments.dsn or os.environ.get(DSN_VARIABLE) or None
    if dsn is None:
        print(
            f"{PROG}: no database given: pass --dsn postgresql://USER@HOST:PORT/DB "
            f"or set {DSN_VARIABLE}",
            file=stderr,
        )
        return EXIT_USAGE
    problem = _dsn_problem(dsn)
    if problem is not None:
        print(f"{PROG}: {problem}", file=stderr)
        return EXIT_USAGE
    try:
        schema = validate_schema(arguments.schema)
    except SettingsError as error:
        print(f"{PROG}: --schema: {error.message}", file=stderr)
        return EXIT_USAGE
    try:
        applied = asyncio.run(_migrate(dsn, schema))
    except _DsnError as error:
        print(f"{PROG}: {error}", file=stderr)
        return EXIT_USAGE
    except _ConnectError as error:
        print(f"{PROG}: {error}", file=stderr)
        return EXIT_FAILED
    except MigrationError as error:
        print(f"{PROG}: {error} (schema {schema}, nothing of it was kept)", file=stderr)
        return EXIT_FAILED
    except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as error:
        print(f"{PROG}: {where(dsn)}: {_one_line(error)}", file=stderr)
        return EXIT_FAILED
    if not applied:
        print(f"up to date (schema {schema})")
    return EXIT_OK


async def _migrate(dsn: str, schema: str) -> list[str]:
    try:
        connection = await asyncpg.connect(dsn, timeout=_CONNECT_TIMEOUT_SECONDS)
    except ValueError as error:  # asyncpg's ClientConfigurationError is one too
        raise _DsnError(f"the DSN for {where(dsn)} is not usable: {_one_line(error)}") from None
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as error:
        raise _ConnectError(f"cannot connect to {where(dsn)}: {_one_line(error)}") from None
    try:
        return await apply_migrations(connection, schema=schema, on_applied=_report)
    finally:
        await connection.close()


def _report(version: str) -> None:
    print(f"applied {version}", flush=True)


def _dsn_problem(dsn: str) -> str | None:
    """Why ``dsn`` cannot even be tried, in words; ``None`` when it looks usable."""
    parts = urlsplit(dsn)
    if parts.scheme not in _SCHEMES:
        return (
            "the DSN must be a PostgreSQL URL starting with postgresql://, got one starting "
            f"with {parts.scheme + '://' if parts.scheme else 'no scheme'}"
        )
    try:
        parts.port  # noqa: B018 - parsing the port is the check
    except ValueError:
        return "the DSN's port is not a number from 0 to 65535"
    return None


def where(dsn: str) -> str:
    """``host:port/database`` of a DSN for messages; never the user or password."""
    try:
        parts = urlsplit(dsn)
        host = parts.hostname
        port = parts.port
    except ValueError:
        return "the database (DSN not readable)"
    query = parse_qs(parts.query)
    if not host and "host" in query:
        host = query["host"][0]
    shown = host or "the default host"
    if port is not None:
        shown += f":{port}"
    database = parts.path.lstrip("/")
    return f"{shown}/{database}" if database else shown


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return text or type(error).__name__
