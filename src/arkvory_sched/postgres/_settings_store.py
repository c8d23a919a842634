"""The operator settings record in PostgreSQL: one row, a revision, only changed fields.

The record holds the camelCase fields an operator changed (R-SET-1); the environment
supplies everything else, and ``{}`` means "the environment". Every process reads the
same row, so a change made through any gateway reaches the whole fleet.

Writes are a compare-and-set in one ``UPDATE … WHERE revision = $expected`` statement
(R-SET-5): PostgreSQL re-checks the condition on the newest row version after waiting
for a concurrent writer's row lock, so of two writers that read the same revision
exactly one succeeds and the other learns the current revision. No update is lost and
no transaction or explicit lock is needed, which also lets the store run on a pool.

Writes are validated against the settings they would produce before anything is saved
(R-SET-2). Reads are forgiving instead (R-SET-4, R-SET-6): a record saved by a newer
version, or one that stopped fitting after the environment changed, must never stop a
process from starting, so :func:`apply_stored` falls back to the environment and
explains why rather than raising.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType
from typing import Any, Final

from .._exceptions import ArkvoryError, SettingsError
from .._settings import OPERATOR_FIELDS, SchedulerSettings
from . import _sql as sql
from ._db import Queryable
from ._migrate import DEFAULT_SCHEMA, quote_schema

__all__ = [
    "RevisionMismatchError",
    "SettingsStore",
    "StoredSettings",
    "apply_stored",
    "validate_fields",
]

_CAMEL_OF: Final[Mapping[str, str]] = MappingProxyType(
    {attribute: name for name, attribute in OPERATOR_FIELDS.items()}
)


@dataclass(frozen=True)
class StoredSettings:
    """The record as saved: ``fields`` holds only what an operator changed, camelCase.

    ``updated_by`` and ``updated_at`` are ``None`` until the first change.
    """

    revision: int
    fields: Mapping[str, object]
    updated_by: str | None
    updated_at: datetime | None


class RevisionMismatchError(ArkvoryError):
    """The record changed since the caller read it; the API answers ``409``.

    ``current`` lets the caller show the operator what happened (or read again and
    retry) without another round trip to find out.
    """

    def __init__(self, expected: int, current: int) -> None:
        super().__init__(
            f"the settings are at revision {current}, not the expected revision {expected}; "
            "read them again and reapply the change"
        )
        self.expected = expected
        self.current = current


class SettingsStore:
    """Reads and compare-and-sets the settings record of one schema.

    ``environment`` is the settings this process built from its environment: a change
    is accepted only if it produces working settings on top of them, so that the
    process that accepted a change can also run it.
    """

    def __init__(
        self,
        database: Queryable,
        *,
        environment: SchedulerSettings,
        schema: str = DEFAULT_SCHEMA,
    ) -> None:
        self._database = database
        self._environment = environment
        quoted = quote_schema(schema)
        self._table = f"{quoted}.download_settings"
        self._read = sql.READ_SETTINGS.fill(schema=quoted)
        self._save = sql.SAVE_SETTINGS.fill(schema=quoted)
        self._revision = sql.SETTINGS_REVISION.fill(schema=quoted)

    @property
    def environment(self) -> SchedulerSettings:
        """The base that changes are validated against."""
        return self._environment

    async def read(self) -> StoredSettings:
        """The record as saved now."""
        row = await self._database.fetchrow(self._read)
        if row is None:
            raise ArkvoryError(
                f"{self._table} has no settings row; run `arkvory-sched migrate` on this schema"
            )
        return _stored(row)

    async def compare_and_set(
        self, fields: Mapping[str, object], *, expected_revision: int, updated_by: str
    ) -> StoredSettings:
        """Replace the record with ``fields`` if it is still at ``expected_revision``.

        ``fields`` is the whole new record, not a patch: the caller sends what the
        operator wants changed from the environment, and ``{}`` returns to it.
        Raises :class:`SettingsError` (naming the camelCase field) when the fields
        would not work, and :class:`RevisionMismatchError` when another change came
        first; in both cases nothing is saved.
        """
        checked = validate_fields(self._environment, fields)
        row = await self._database.fetchrow(
            self._save,
            json.dumps(checked),
            updated_by,
            expected_revision,
        )
        if row is None:
            current = await self._database.fetchval(self._revision)
            if current is None:
                raise ArkvoryError(
                    f"{self._table} has no settings row; run `arkvory-sched migrate` on this schema"
                )
            raise RevisionMismatchError(expected_revision, int(current))
        return _stored(row)


def validate_fields(
    environment: SchedulerSettings, fields: Mapping[str, object]
) -> dict[str, object]:
    """``fields`` as they will be saved, or :class:`SettingsError` naming the bad field.

    Unknown names are refused here, unlike on reading: an operator who misspells a
    field must hear about it rather than have it silently kept and ignored.
    """
    changes: dict[str, object] = {}
    for name, value in fields.items():
        attribute = OPERATOR_FIELDS.get(name)
        if attribute is None:
            raise SettingsError(
                name, "unknown setting; known settings are " + ", ".join(OPERATOR_FIELDS)
            )
        changes[attribute] = value
    try:
        environment.with_changes(**changes)
    except SettingsError as error:
        raise _camel_error(error) from None
    checked: dict[str, object] = {}
    for name, value in fields.items():
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            raise SettingsError(name, f"cannot be saved: {value!r} is not JSON") from None
        checked[name] = list(value) if isinstance(value, tuple) else value
    return checked


def apply_stored(
    environment: SchedulerSettings, fields: Mapping[str, object]
) -> tuple[SchedulerSettings, list[str]]:
    """The settings to run on, and the problems found in the stored ``fields``.

    Never raises for the record's content: unknown fields (saved by a newer version
    before a rollback) are skipped with a note, and a record that does not produce
    working settings on this server is ignored as a whole, because running on half of
    an operator's change could combine values they never chose together.
    """
    problems: list[str] = []
    changes: dict[str, object] = {}
    for name, value in fields.items():
        attribute = OPERATOR_FIELDS.get(name)
        if attribute is None:
            problems.append(
                f"The stored setting {name!r} is not known to this version and is skipped "
                "(it may have been saved by a newer version)."
            )
            continue
        changes[attribute] = value
    if not changes:
        return environment, problems
    try:
        return environment.with_changes(**changes), problems
    except SettingsError as error:
        camel = _CAMEL_OF.get(error.field, error.field)
        problems.append(
            f"The stored setting {camel!r} does not fit this server ({error.message}), so the "
            "stored settings are not applied and the queue runs on the environment settings; "
            "save the settings again to fix this."
        )
        return environment, problems


def _camel_error(error: SettingsError) -> SettingsError:
    camel = _CAMEL_OF.get(error.field)
    if camel is None or camel == error.field:
        return error
    return SettingsError(camel, error.message)


def _stored(row: Any) -> StoredSettings:
    decoded = json.loads(row["fields"])
    if not isinstance(decoded, dict):  # the table's CHECK makes this unreachable
        decoded = {}
    updated_at = row["updated_at"]
    updated_by = row["updated_by"]
    return StoredSettings(
        revision=int(row["revision"]),
        fields=MappingProxyType(decoded),
        updated_by=None if updated_by is None else str(updated_by),
        updated_at=updated_at if isinstance(updated_at, datetime) else None,
    )
