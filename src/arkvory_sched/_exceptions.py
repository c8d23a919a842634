"""Exceptions of ``arkvory_sched``.

The whole tree (every class below the root is raised somewhere, the root itself never:
a caller catches a name; tests check the drawing and both rules)::

    ArkvoryError                 root of everything this package raises
    ├── SettingsError            a setting cannot work (``field`` names it) — HTTP 400
    │   └── ConfigurationError   … and it came from an environment variable (``variable``)
    ├── InvalidRequestError      a request field is malformed (``field``) — HTTP 400
    ├── StoreUnavailableError    the queue's store cannot be read or written now — HTTP 503
    ├── MigrationError           a migration failed (``version``); nothing of it was kept
    ├── RevisionMismatchError    the settings record moved on — HTTP 409
    └── SettingsUnavailableError the settings store cannot be reached — HTTP 503

``StoreUnavailableError`` is what a scheduler's store raises when its database does not
answer: the PostgreSQL store maps every driver error (asyncpg's, a refused or dropped
connection, a timeout) to it at one boundary (``postgres._boundary``), with the driver's
error as its ``__cause__``. ``MigrationError`` is raised by the PostgreSQL migration
runner and also exported by ``arkvory_sched.postgres``. Every settings store raises the
two settings-store errors, and each turns its driver's errors (asyncpg, sqlite3) into
``SettingsUnavailableError`` at its boundary. The operator API catches these by name.

Nothing else leaves the package through its public API. The text parsers' own
``UnparsableError`` (a ``ValueError``, in ``settings._parsing``) is turned into a
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
    "MigrationError",
    "RevisionMismatchError",
    "SettingsError",
    "SettingsUnavailableError",
    "StoreUnavailableError",
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


class StoreUnavailableError(ArkvoryError):
    """The queue's store cannot be read or written now: its database does not answer.

    Raised from the driver's error (``raise … from``), which stays its ``__cause__``.
    Not a defect: the database may be restarting. The operator API answers ``503
    storage unavailable``; an admission that meets it is refused the same way.
    """


class MigrationError(ArkvoryError):
    """A migration failed; ``version`` names it. Nothing of it was committed."""

    def __init__(self, version: str, message: str) -> None:
        super().__init__(f"migration {version} failed: {message}")
        self.version = version
        self.message = message


class RevisionMismatchError(ArkvoryError):
    """The record changed since the caller read it; the API answers ``409``.

    ``current`` and ``updated_by`` let the caller show the operator who changed it
    (or read again and retry) without another round trip to find out.
    """

    def __init__(self, expected: int, current: int, updated_by: str | None = None) -> None:
        by = f" (changed by {updated_by})" if updated_by else ""
        super().__init__(
            f"the settings are at revision {current}{by}, not the expected revision "
            f"{expected}; read them again and reapply the change"
        )
        self.expected = expected
        self.current = current
        self.updated_by = updated_by


class SettingsUnavailableError(ArkvoryError):
    """The store cannot be read or written now (database down, file locked too long).

    Each store turns its driver's errors into this one at its boundary, so the keeper
    and the API handle one exception whatever the store: the keeper keeps the running
    settings and tries again, the API answers ``503``.
    """
