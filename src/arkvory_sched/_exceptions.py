"""Exceptions of ``arkvory_sched``.

The whole tree (every class is raised somewhere; a test checks both)::

    ArkvoryError                 root of everything this package raises
    ├── SettingsError            a setting cannot work (``field`` names it) — HTTP 400
    │   └── ConfigurationError   … and it came from an environment variable (``variable``)
    ├── InvalidRequestError      a request field is malformed (``field``) — HTTP 400
    ├── MigrationError           a migration failed (``version``)      [arkvory_sched.postgres]
    ├── RevisionMismatchError    the settings record moved on — HTTP 409 [_settings_store]
    └── SettingsUnavailableError the settings store cannot be reached — HTTP 503 [_settings_store]

``MigrationError`` is defined and exported by ``arkvory_sched.postgres``, beside the
storage it belongs to. The two settings-store errors are defined with the store port
(``_settings_store``) and exported here: every store raises them, and each store turns
its driver's errors (asyncpg, sqlite3) into ``SettingsUnavailableError`` at its boundary.

Nothing else leaves the package through its public API. The text parsers' own
``UnparsableError`` (a ``ValueError``, in ``_settings_parsing``) is turned into a
:class:`ConfigurationError` by ``SchedulerSettings.from_env``. A closed scheduler raises
nothing: it answers ``503`` busy (R-RES-4). A broken or missing statement file of the
PostgreSQL store makes importing it fail with ``StatementError``
(``postgres._statements``): a defect of the installation, not an error to handle.
"""

from __future__ import annotations

__all__ = [
    "ArkvoryError",
    "ConfigurationError",
    "InvalidRequestError",
    "SettingsError",
]


class ArkvoryError(Exception):
    """Root of every exception raised by arkvory_sched."""


class SettingsError(ArkvoryError, ValueError):
    """A setting that cannot work; ``field`` is its settings name (e.g. ``reserve``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class ConfigurationError(SettingsError):
    """An environment variable with an unusable value; ``variable`` names it."""

    def __init__(self, variable: str, field: str, message: str) -> None:
        ArkvoryError.__init__(self, f"{variable}: {message}")
        self.field = field
        self.message = message
        self.variable = variable


class InvalidRequestError(ArkvoryError, ValueError):
    """A malformed request field (a header value); ``field`` names it for the 400 answer."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
