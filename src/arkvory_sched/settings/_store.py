"""The settings store port: one operator record with a revision, and its audit trail.

Every implementation (PostgreSQL for a fleet, SQLite for the embedded default) keeps
the same record (R-SET-1): the camelCase fields an operator changed — operator fields,
``classWindows`` and ``serviceAccountClasses`` — with ``revision``, ``updatedBy`` and
``updatedAt``. ``{}`` means "the environment". A change is a compare-and-set in one
statement (R-SET-5); every change and every refused attempt is written to the audit
trail. One contract suite (``tests/contract/test_settings_store_contract.py``) runs
against every implementation.

Writes are validated before anything is saved (R-SET-2); reads are forgiving
(R-SET-4, R-SET-6): :func:`apply_stored` never raises for the record's content.
"""

from __future__ import annotations

import abc
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from types import MappingProxyType
from typing import Final

from .._exceptions import RevisionMismatchError, SettingsError
from ._values import OPERATOR_FIELDS, SchedulerSettings

__all__ = [
    "AuditEntry",
    "AuditOutcome",
    "SettingsStore",
    "StoredSettings",
    "apply_stored",
    "attempted_json",
    "audit_entry",
    "camel_error",
    "check_page",
    "decode_record",
    "record_diff",
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


class AuditOutcome(StrEnum):
    """What became of one attempt to change the record."""

    APPLIED = "applied"
    REVISION_MISMATCH = "revision_mismatch"
    INVALID = "invalid"


@dataclass(frozen=True)
class AuditEntry:
    """One attempt to change the record, as the history shows it.

    ``revision`` is the revision the attempt produced when applied, else the revision
    the record was at. ``change`` is :func:`record_diff` of the record before and the
    record asked for. ``detail`` says why a refused attempt was refused.
    """

    id: int
    at: datetime
    actor: str
    outcome: AuditOutcome
    expected_revision: int
    revision: int
    change: Mapping[str, Mapping[str, object]]
    detail: str | None


class SettingsStore(abc.ABC):
    """Reads and compare-and-sets the operator record; keeps the audit trail.

    ``environment`` is the settings this process built from its environment: a change
    is accepted only if it produces working settings on top of them, so that the
    process that accepted a change can also run it.
    """

    @property
    @abc.abstractmethod
    def environment(self) -> SchedulerSettings:
        """The base that changes are validated against."""

    @abc.abstractmethod
    async def read(self) -> StoredSettings:
        """The record as saved now; :class:`SettingsUnavailableError` when unreachable."""

    async def compare_and_set(
        self, fields: Mapping[str, object], *, expected_revision: int, updated_by: str
    ) -> StoredSettings:
        """Replace the record with ``fields`` if it is still at ``expected_revision``.

        ``fields`` is the whole new record, not a patch; ``{}`` returns to the
        environment. Raises :class:`SettingsError` (its field a path such as
        ``classWindows/bulk/windows/0/zone``) when the fields would not work, and
        :class:`RevisionMismatchError` (with the current revision and who made it)
        when another change came first; in both cases nothing is saved and the
        refusal is audited. An applied change is audited in the same statement that
        saves it. :class:`SettingsUnavailableError` when the store cannot be reached.

        The rule is the same on every store; an implementation supplies the two
        statements, :meth:`_save` and :meth:`_audit_refusal`.
        """
        try:
            checked = validate_fields(self.environment, fields)
        except SettingsError as error:
            await self._audit_refusal(
                AuditOutcome.INVALID, fields, expected_revision, updated_by, str(error)
            )
            raise
        saved = await self._save(json.dumps(checked), updated_by, expected_revision)
        if saved is not None:
            return saved
        current, by = await self._audit_refusal(
            AuditOutcome.REVISION_MISMATCH, fields, expected_revision, updated_by, None
        )
        raise RevisionMismatchError(expected_revision, current, by)

    @abc.abstractmethod
    async def _save(
        self, fields_json: str, updated_by: str, expected_revision: int
    ) -> StoredSettings | None:
        """The one compare-and-set statement (its trigger audits the change): the new
        record, or ``None`` when the record is not at ``expected_revision``."""

    @abc.abstractmethod
    async def _audit_refusal(
        self,
        outcome: AuditOutcome,
        fields: Mapping[str, object],
        expected_revision: int,
        updated_by: str,
        detail: str | None,
    ) -> tuple[int, str | None]:
        """Audit a refused attempt; the revision the record is at, and who made it."""

    @abc.abstractmethod
    async def history(self, *, limit: int = 50, before: int | None = None) -> list[AuditEntry]:
        """Audit entries newest first; ``before`` is the ``id`` to continue below.

        Every applied change and every refused attempt has one entry; ``limit`` caps
        a page, and the last entry's ``id`` passed as ``before`` gives the next page.
        """

    async def close(self) -> None:  # noqa: B027 (nothing to close by default)
        """Release what the store holds (a pool it made, a file)."""


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
        raise camel_error(error) from None
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
        camel = camel_error(error).field
        problems.append(
            f"The stored setting {camel!r} does not fit this server ({error.message}), so the "
            "stored settings are not applied and the queue runs on the environment settings; "
            "save the settings again to fix this."
        )
        return environment, problems


def record_diff(
    before: Mapping[str, object], after: Mapping[str, object]
) -> dict[str, dict[str, object]]:
    """Each record field that differs: ``{"from": old, "to": new}``, ``None`` for absent
    (absent is the environment's value)."""
    return {
        name: {"from": before.get(name), "to": after.get(name)}
        for name in sorted(set(before) | set(after))
        if before.get(name) != after.get(name)
    }


def camel_error(error: SettingsError) -> SettingsError:
    """``error`` with its field (or the first step of its path) in the record's name."""
    own, slash, inside = error.field.partition("/")
    camel = _CAMEL_OF.get(own)
    if camel is None or camel == own:
        return error
    return SettingsError(camel + slash + inside, error.message)


def check_page(limit: int, before: int | None) -> None:
    """Refuse a page the stores would read differently (SQLite takes ``LIMIT -1`` for
    "no limit", PostgreSQL refuses it), so both answer the same."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"limit must be a whole number of 1 or more, not {limit!r}")
    if before is not None and (isinstance(before, bool) or not isinstance(before, int)):
        raise ValueError(f"before must be an audit entry id, not {before!r}")


def attempted_json(fields: Mapping[str, object]) -> str:
    """``fields`` as JSON for the audit, even when they are not valid settings.

    A refused attempt is audited with what was asked, and what was asked may hold
    values JSON cannot carry (the reason it was refused): those are kept as their
    ``repr`` rather than losing the entry.
    """
    return json.dumps(dict(fields), default=repr, sort_keys=True)


def decode_record(text: str | None) -> dict[str, object]:
    """A stored JSON object as a dict; anything else (never written by a store) is ``{}``."""
    decoded = json.loads(text) if text else {}
    return decoded if isinstance(decoded, dict) else {}


def audit_entry(
    *,
    id: int,
    at: datetime,
    actor: str,
    outcome: str,
    expected_revision: int,
    revision: int,
    revision_by: str | None,
    before: str | None,
    attempted: str | None,
    detail: str | None,
) -> AuditEntry:
    """One audit row of either store as an :class:`AuditEntry`.

    A mismatch row stores who made the revision it met (``revision_by``) rather than a
    sentence, because that is only known inside the statement that writes the row;
    the sentence is the one :class:`RevisionMismatchError` gave the caller.
    """
    kind = AuditOutcome(outcome)
    if kind is AuditOutcome.REVISION_MISMATCH and detail is None:
        detail = str(RevisionMismatchError(expected_revision, revision, revision_by))
    return AuditEntry(
        id=id,
        at=at,
        actor=actor,
        outcome=kind,
        expected_revision=expected_revision,
        revision=revision,
        change=MappingProxyType(record_diff(decode_record(before), decode_record(attempted))),
        detail=detail,
    )
