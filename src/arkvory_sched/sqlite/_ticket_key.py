"""The embedded default's queue-ticket signing key, kept in the settings file.

A ticket must verify after a restart (R-TICKET-4), so the key is stored, and it is
stored with the settings so that one file holds what a single server keeps. The first
process to open the file creates the key; every process that shares the file reads
the same one: ``INSERT … ON CONFLICT DO NOTHING`` and then a read, each statement under
the file's write or read lock, so two processes started at once agree on one key.

Servers of earlier versions kept the key in a file of its own,
``<served directory>/.arkvory-ticket-key`` (hexadecimal). When that file exists and the
settings file has no key yet, its key is imported instead of making a new one, so the
tickets clients hold stay valid across the upgrade. It is imported once: after that
the settings file's key is the key and the old file is no longer read (it is left in
place, so a rollback to the earlier version still finds it).
"""

from __future__ import annotations

import binascii
import secrets
from pathlib import Path
from typing import Final

from .._exceptions import ConfigurationError
from . import _database as db

__all__ = ["LEGACY_KEY_FILE_NAME", "TICKET_KEY_BYTES", "load_or_create_ticket_key"]

TICKET_KEY_BYTES: Final = 32
LEGACY_KEY_FILE_NAME: Final = ".arkvory-ticket-key"
_MIN_LEGACY_BYTES: Final = 16  # what the earlier versions accepted


def load_or_create_ticket_key(path: str | Path, *, legacy_key_file: Path | None = None) -> bytes:
    """The ticket key of the settings file at ``path``, created on first use.

    ``legacy_key_file`` is the earlier versions' key file: imported instead of a new
    random key if the settings file has none yet. Blocking (file I/O): call it at
    start-up or from a worker thread. Raises :class:`ConfigurationError` for a legacy
    file that is not a key.
    """
    candidate, source = _new_key(legacy_key_file)
    connection = db.open_database(Path(path))
    try:
        db.when_not_busy(lambda: connection.execute(db.CREATE_TICKET_KEY, (candidate, source)))
        (key,) = db.when_not_busy(lambda: connection.execute(db.READ_TICKET_KEY).fetchone())
    finally:
        connection.close()
    return bytes(key)


def _new_key(legacy_key_file: Path | None) -> tuple[bytes, str]:
    """The key to store if there is none yet, and where it came from."""
    if legacy_key_file is None:
        return secrets.token_bytes(TICKET_KEY_BYTES), "generated"
    try:
        text = legacy_key_file.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return secrets.token_bytes(TICKET_KEY_BYTES), "generated"
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigurationError(
            "ARKVORY_TICKET_KEY",
            "ticket_key",
            f"cannot read the key file {legacy_key_file}: {error}",
        ) from None
    try:
        key = binascii.unhexlify(text)
    except (binascii.Error, ValueError):
        key = b""
    if len(key) < _MIN_LEGACY_BYTES:
        raise ConfigurationError(
            "ARKVORY_TICKET_KEY",
            "ticket_key",
            f"the key file {legacy_key_file}: expected at least {_MIN_LEGACY_BYTES} bytes "
            "as hexadecimal",
        )
    return key, "imported"
