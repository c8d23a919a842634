"""Opening the settings file: permissions, WAL, the busy timeout, the schema, the SQL.

Several processes may share one file (workers of one server, a CLI beside it), so
every connection is set up the same way here:

* the file is created with mode 0600 before SQLite opens it, because it holds the
  ticket-signing key (SQLite gives its ``-wal`` and ``-shm`` files the same mode);
* WAL mode, so readers never wait for a writer and a writer waits for no reader;
* a busy timeout (``sqlite3.connect``'s ``timeout``): a connection that finds the
  write lock taken waits for it (up to :data:`BUSY_TIMEOUT_SECONDS`) instead of
  failing at once;
* autocommit (``isolation_level=None``): each statement is its own transaction, which
  is what the one-statement compare-and-set relies on, and no connection holds a lock
  between two calls;
* ``schema.sql`` runs on every open; it is idempotent and takes the write lock first.

The statements live in ``statements.sql`` beside this module (read as package data,
named blocks in the format of ADR 0018).
"""

from __future__ import annotations

import os
import sqlite3
from importlib import resources
from pathlib import Path
from typing import Final

from ..postgres._statements import parse_statement_files

__all__ = [
    "AUDIT_REFUSAL",
    "BUSY_TIMEOUT_SECONDS",
    "CREATE_TICKET_KEY",
    "READ_SETTINGS",
    "READ_TICKET_KEY",
    "SAVE_SETTINGS",
    "SETTINGS_HISTORY",
    "open_database",
]

BUSY_TIMEOUT_SECONDS: Final = 10.0
_PACKAGE: Final = "arkvory_sched.sqlite"


def _read(name: str) -> str:
    return resources.files(_PACKAGE).joinpath(name).read_text(encoding="utf-8")


_SCHEMA: Final = _read("schema.sql")
_CATALOG: Final = parse_statement_files([("statements.sql", _read("statements.sql"))])

READ_SETTINGS: Final = _CATALOG.statement("read_settings")
SAVE_SETTINGS: Final = _CATALOG.statement("save_settings")
AUDIT_REFUSAL: Final = _CATALOG.statement("audit_refusal")
SETTINGS_HISTORY: Final = _CATALOG.statement("settings_history")
CREATE_TICKET_KEY: Final = _CATALOG.statement("create_ticket_key")
READ_TICKET_KEY: Final = _CATALOG.statement("read_ticket_key")


def open_database(path: Path) -> sqlite3.Connection:
    """A connection to the settings file at ``path``, created with its schema if new.

    Blocking: call it from a worker thread in async code. The connection may be used
    from any thread (``check_same_thread=False``), one at a time: the caller
    serialises its use.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    os.close(descriptor)
    connection = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None, check_same_thread=False
    )
    try:
        connection.executescript(_SCHEMA)
    except BaseException:
        connection.close()
        raise
    return connection
