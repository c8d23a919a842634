"""Opening the settings file: permissions, WAL, the busy timeout, the schema, the SQL.

Several processes may share one file (workers of one server, a CLI beside it), so
every connection is set up the same way here:

* the file is created with mode 0600 before SQLite opens it, because it holds the
  ticket-signing key (SQLite gives its ``-wal`` and ``-shm`` files the same mode);
* WAL mode, so readers never wait for a writer and a writer waits for no reader;
* a busy timeout (``sqlite3.connect``'s ``timeout``): a connection that finds the
  write lock taken waits for it (up to :data:`BUSY_TIMEOUT_SECONDS`) instead of
  failing at once; and, around that, :func:`when_not_busy` tries again for up to
  :data:`BUSY_DEADLINE_SECONDS` — SQLite's busy handler is not fair (a waiter may lose
  the lock to newcomers for longer than its timeout under many writers) and is not
  asked at all in some cases (switching a new file to WAL while another process opens
  it), and "busy" must not read as "the file is unusable";
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
import random
import re
import sqlite3
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Final, TypeVar

__all__ = [
    "AUDIT_REFUSAL",
    "BUSY_DEADLINE_SECONDS",
    "BUSY_TIMEOUT_SECONDS",
    "CREATE_TICKET_KEY",
    "READ_SETTINGS",
    "READ_TICKET_KEY",
    "SAVE_SETTINGS",
    "SETTINGS_HISTORY",
    "named_statements",
    "open_database",
    "when_not_busy",
]

BUSY_TIMEOUT_SECONDS: Final = 10.0
BUSY_DEADLINE_SECONDS: Final = 60.0
_RETRY_PAUSE_SECONDS: Final = (0.01, 0.25)  # first pause, longest pause
_PACKAGE: Final = "arkvory_sched.sqlite"
_T = TypeVar("_T")


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

    def create_schema() -> None:
        try:
            connection.executescript(_SCHEMA)
        except sqlite3.OperationalError:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise

    try:
        when_not_busy(create_schema)
    except BaseException:
        connection.close()
        raise
    return connection


def when_not_busy(work: Callable[[], _T]) -> _T:
    """``work()``, tried again while SQLite says the file is locked or busy, for up to
    :data:`BUSY_DEADLINE_SECONDS`; any other error, or the deadline, raises.

    Only for work that does nothing when it fails this way: one statement in autocommit
    mode, or a script that rolls back its own transaction. Blocking: the pauses sleep
    the worker thread it runs in.
    """
    deadline = time.monotonic() + BUSY_DEADLINE_SECONDS
    pause, longest = _RETRY_PAUSE_SECONDS
    while True:
        try:
            return work()
        except sqlite3.OperationalError as error:
            text = str(error)
            if "locked" not in text and "busy" not in text:
                raise
            if time.monotonic() + pause > deadline:
                raise
        time.sleep(pause * random.uniform(0.5, 1.0))
        pause = min(longest, pause * 2)
