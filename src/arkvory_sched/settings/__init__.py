"""The settings: one checked value, where it comes from, where it is kept, who applies it.

Settings come from two layers (R-SET-1): the environment at start-up, and the operator
record a store keeps and a keeper lays over it at run time (ADR 0022). Every path into
a :class:`SchedulerSettings` goes through the same checks, so a scheduler never has to
check a value again.

- :mod:`._fields`: the one catalogue of fields: what each accepts, its variable, its
  scope, the rule that derives it. A new setting is one entry there (and one keyword
  of :class:`SchedulerSettings`, which a test holds to the catalogue).
- :mod:`._values`: :class:`SchedulerSettings`, the value the fields make up.
- :mod:`._parsing` and :mod:`._env`: text from the environment into values.
- :mod:`._structured`: the two structured fields, class windows and service-account
  classes, checked and shown.
- :mod:`._store`: the port every settings store implements, the record and its audit.
- :mod:`._keeper`: :class:`SettingsKeeper`, which applies the newest record.

The package stands on the policy (strategies, class schedules) and on plain values,
never on a scheduler: the keeper names only what it needs of one.
"""

from __future__ import annotations

from ..policy import Strategy
from ._env import configuration_table
from ._fields import MIB, OPERATOR_FIELDS
from ._keeper import DEFAULT_REFRESH_SECONDS, Configurable, SettingsKeeper
from ._parsing import UnparsableError, parse_rate, parse_size
from ._store import (
    AuditEntry,
    AuditOutcome,
    SettingsStore,
    StoredSettings,
    apply_stored,
    attempted_json,
    audit_entry,
    camel_error,
    check_page,
    decode_record,
    record_diff,
    validate_fields,
)
from ._values import SchedulerSettings

__all__ = [
    "DEFAULT_REFRESH_SECONDS",
    "MIB",
    "OPERATOR_FIELDS",
    "AuditEntry",
    "AuditOutcome",
    "Configurable",
    "SchedulerSettings",
    "SettingsKeeper",
    "SettingsStore",
    "StoredSettings",
    "Strategy",
    "UnparsableError",
    "apply_stored",
    "attempted_json",
    "audit_entry",
    "camel_error",
    "check_page",
    "configuration_table",
    "decode_record",
    "parse_rate",
    "parse_size",
    "record_diff",
    "validate_fields",
]
