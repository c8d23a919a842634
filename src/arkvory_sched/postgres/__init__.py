"""PostgreSQL storage shared by every process of a fleet: migrations, settings, ticket key.

Everything lives in one schema of its own (default ``arkvory``), so that it can be
excluded from backups (R-PG-5) and several installations can share a database.
"""

from __future__ import annotations

from ._migrate import (
    DEFAULT_SCHEMA,
    MigrationError,
    apply_migrations,
    pending_migrations,
    validate_schema,
)
from ._options import PostgresOptions
from ._scheduler import PostgresScheduler
from ._settings_store import PostgresSettingsStore
from ._ticket_key import ensure_ticket_key, read_ticket_key

__all__ = [
    "DEFAULT_SCHEMA",
    "MigrationError",
    "PostgresOptions",
    "PostgresScheduler",
    "PostgresSettingsStore",
    "apply_migrations",
    "ensure_ticket_key",
    "pending_migrations",
    "read_ticket_key",
    "validate_schema",
]
