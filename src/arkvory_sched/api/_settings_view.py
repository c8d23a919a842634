"""The settings resource as JSON: the record, where each value comes from, the audit.

``GET`` and a successful ``PUT`` answer the same document, so a client that changed
the settings sees exactly what a later read would show: the effective value of every
operator field (``settings``), whether it is the ``environment``'s or the
``operator``'s (``sources``), the fields lowered to fit a changed ``sessions``
(``adjusted``, R-SET-2), the stored record itself (``record``: what to send back to
keep it), the revision and who made it, and why any of it is not in force
(``problems``, R-SET-4 and R-SET-6).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Final, Literal

from .._exceptions import SettingsError
from ..settings import (
    OPERATOR_FIELDS,
    AuditEntry,
    SchedulerSettings,
    StoredSettings,
    apply_stored,
    validate_fields,
)

__all__ = [
    "ENVIRONMENT",
    "OPERATOR_SOURCE",
    "audit_document",
    "etag_of",
    "invalid_fields",
    "settings_document",
    "timestamp",
]

ENVIRONMENT: Final = "environment"
OPERATOR_SOURCE: Final = "operator"
Source = Literal["environment", "operator"]


def etag_of(revision: int) -> str:
    """The strong entity tag of a revision, as ``ETag`` and ``If-Match`` carry it."""
    return f'"rev-{revision}"'


def timestamp(moment: datetime | None) -> str | None:
    """RFC 3339 in UTC with milliseconds, or ``None``."""
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def settings_document(
    stored: StoredSettings,
    environment: SchedulerSettings,
    *,
    applied_revision: int | None,
    running_problems: Iterable[str] = (),
) -> dict[str, object]:
    """The resource for ``stored`` laid over ``environment``.

    ``applied_revision`` is the revision this process runs (``None`` when unknown);
    ``running_problems`` are what the process applying the record reported, added to
    what reading this record on this server finds.
    """
    effective, problems = apply_stored(environment, stored.fields)
    applied = effective is not environment
    shown = effective.operator_fields()
    base = environment.operator_fields()
    sources: dict[str, Source] = {
        name: OPERATOR_SOURCE if applied and name in stored.fields else ENVIRONMENT
        for name in OPERATOR_FIELDS
    }
    adjusted = [
        name
        for name in OPERATOR_FIELDS
        if sources[name] == ENVIRONMENT and shown[name] != base[name]
    ]
    every_problem = list(dict.fromkeys([*problems, *running_problems]))
    return {
        "revision": stored.revision,
        "updatedBy": stored.updated_by,
        "updatedAt": timestamp(stored.updated_at),
        "appliedRevision": applied_revision,
        "settings": shown,
        "sources": sources,
        "adjusted": adjusted,
        "environment": base,
        "record": dict(stored.fields),
        "problems": every_problem,
    }


def invalid_fields(
    environment: SchedulerSettings, fields: Mapping[str, object]
) -> list[SettingsError]:
    """Every field that keeps ``fields`` from working, not just the first.

    Validation stops at the first bad field; to name each one, the bad field is set
    aside and the rest checked again, until what remains works. A field is thus blamed
    in the company of the other fields the operator sent, never alone: ``reserve: 20``
    is fine beside ``sessions: 32`` and wrong without it.
    """
    remaining = dict(fields)
    errors: list[SettingsError] = []
    while remaining:
        try:
            validate_fields(environment, remaining)
        except SettingsError as error:
            errors.append(error)
            own = error.field.partition("/")[0]
            if own not in remaining:  # blamed on a field it derived: nothing to set aside
                break
            del remaining[own]
            continue
        break
    return errors


def audit_document(entry: AuditEntry) -> dict[str, object]:
    """One audit entry as the history shows it."""
    return {
        "id": entry.id,
        "at": timestamp(entry.at),
        "actor": entry.actor,
        "outcome": entry.outcome.value,
        "expectedRevision": entry.expected_revision,
        "revision": entry.revision,
        "change": {name: dict(diff) for name, diff in entry.change.items()},
        "detail": entry.detail,
    }
