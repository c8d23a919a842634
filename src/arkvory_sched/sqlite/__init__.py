"""SQLite storage of the embedded default: the settings record and the ticket key.

One file beside what a single server serves keeps its operator settings (with their
audit trail) and its queue-ticket signing key across restarts, with the standard
library's ``sqlite3`` only. Several processes may share the file. A fleet uses
PostgreSQL instead (``arkvory_sched.postgres``), where the same record and key live in
the queue's schema.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from ._settings_store import SqliteSettingsStore
from ._ticket_key import LEGACY_KEY_FILE_NAME, load_or_create_ticket_key

__all__ = [
    "LEGACY_KEY_FILE_NAME",
    "SETTINGS_FILE_NAME",
    "SETTINGS_FILE_VARIABLE",
    "SqliteSettingsStore",
    "load_or_create_ticket_key",
    "settings_file",
]

SETTINGS_FILE_VARIABLE: Final = "ARKVORY_SETTINGS_FILE"
SETTINGS_FILE_NAME: Final = ".arkvory-settings.sqlite3"


def settings_file(directory: Path, environ: Mapping[str, str] | None = None) -> Path:
    """Where the settings file is: ``$ARKVORY_SETTINGS_FILE``, else a hidden file in
    ``directory`` (a server's served directory: hidden files are never served)."""
    env = os.environ if environ is None else environ
    text = env.get(SETTINGS_FILE_VARIABLE, "").strip()
    return Path(text).expanduser() if text else Path(directory) / SETTINGS_FILE_NAME
