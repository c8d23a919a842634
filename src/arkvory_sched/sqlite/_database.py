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
named blocks as in ADR 0018, without the PostgreSQL store's fragments and templates,
which these few statements do not need).
"""

from __future__ import annotations

import os
import re
import sqlite3
from importlib import resources
from pathlib import Path
from typing import Final

__all__ = [
    "AUDIT_REFUSAL",
    "BUSY_TIMEOUT_SECONDS",
    "CREATE_TICKET_KEY",
    "READ_SETTINGS",
    "READ_TICKET_KEY",
    "SAVE_SETTINGS",
    "SETTINGS_HISTORY",
    "named_statements",
    "open_database",
]

BUSY_TIMEOUT_SECONDS: Final = 10.0
_PACKAGE: Final = "arkvory_sched.sqlite"


_HEADER: Final = re.compile(r"^-- name: ([a-z_]+)$", re.MULTILINE)


def _read(name: str) -> str:
    return resources.files(_PACKAGE).joinpath(name).read_text(encoding="utf-8")


def named_statements(text: str) -> dict[str, str]:
    """The ``-- name: x`` blocks of ``text``: each runs to the next header; the comment
    lines at its top document it and are not sent. Raises ``ValueError`` for a name
    given twice or a block without SQL, when the module is imported."""
    parts = _HEADER.split(text)
    found: dict[str, str] = {}
    for name, block in zip(parts[1::2], parts[2::2], strict=True):
        lines = block.strip().splitlines()
        while lines and lines[0].startswith("--"):
            lines.pop(0)
        if name in found or not lines:
            raise ValueError(f"statements.sql: {name!r} is defined twice or has no SQL")
        found[name] = "\n".join(lines).strip()
    return found


_SCHEMA: Final = _read("schema.sql")
_STATEMENTS: Final = named_statements(_read("statements.sql"))

READ_SETTINGS: Final = _STATEMENTS["read_settings"]
SAVE_SETTINGS: Final = _STATEMENTS["save_settings"]
AUDIT_REFUSAL: Final = _STATEMENTS["audit_refusal"]
SETTINGS_HISTORY: Final = _STATEMENTS["settings_history"]
CREATE_TICKET_KEY: Final = _STATEMENTS["create_ticket_key"]
READ_TICKET_KEY: Final = _STATEMENTS["read_ticket_key"]


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
