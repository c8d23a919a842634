"""The store port's pure parts: strict writing, soft reading, the diff the audit shows."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from arkvory_sched import SchedulerSettings, SettingsError, Strategy
from arkvory_sched.settings._store import (
    AuditOutcome,
    apply_stored,
    attempted_json,
    audit_entry,
    camel_error,
    record_diff,
    validate_fields,
)

ENVIRONMENT = SchedulerSettings(sessions=16)


def test_apply_stored_reads_softly() -> None:
    environment = SchedulerSettings(sessions=8)

    settings, problems = apply_stored(environment, {})
    assert (settings, problems) == (environment, [])

    settings, problems = apply_stored(environment, {"idleSeconds": 12, "windowsV9": {"x": 1}})
    assert settings == environment.with_changes(idle_seconds=12)
    assert len(problems) == 1
    assert "'windowsV9'" in problems[0]
    assert "skipped" in problems[0]

    # Fits a 16-slot server, not this 8-slot one (R-SET-6): the whole record is set aside.
    settings, problems = apply_stored(environment, {"idleSeconds": 12, "reserve": 10})
    assert settings == environment
    assert len(problems) == 1
    assert "'reserve'" in problems[0]
    assert "environment" in problems[0]

    settings, problems = apply_stored(environment, {"perPrincipal": 0})
    assert settings == environment
    assert "'perPrincipal'" in problems[0]

    settings, problems = apply_stored(environment, {"strategy": "shared", "sessions": 4})
    assert settings.strategy is Strategy.SHARED
    assert (settings.sessions, settings.reserve, settings.per_principal) == (4, 1, 1)
    assert problems == []


def test_a_stored_window_that_does_not_fit_names_its_camel_path() -> None:
    window = {"weekdays": ["mon"], "start": "22:00", "end": "06:00", "zone": "Nowhere/Atlantis"}
    fields = {"idleSeconds": 12, "classWindows": {"bulk": {"windows": [window]}}}
    settings, problems = apply_stored(ENVIRONMENT, fields)
    assert settings == ENVIRONMENT, "half of a change is never applied"
    assert len(problems) == 1
    assert "'classWindows/bulk/windows/0/zone'" in problems[0]


def test_camel_error_renames_the_first_step_of_a_path_only() -> None:
    error = camel_error(SettingsError("class_windows/bulk/windows/0/zone", "unknown zone"))
    assert (error.field, error.message) == ("classWindows/bulk/windows/0/zone", "unknown zone")
    assert camel_error(SettingsError("idle_seconds", "x")).field == "idleSeconds"
    assert camel_error(SettingsError("sessions", "x")).field == "sessions"


def test_validate_fields_refuses_unknown_names_and_keeps_json() -> None:
    with pytest.raises(SettingsError) as caught:
        validate_fields(ENVIRONMENT, {"sesions": 8})
    assert caught.value.field == "sesions"
    assert validate_fields(ENVIRONMENT, {"weights": (6, 3, 2, 1)}) == {"weights": [6, 3, 2, 1]}


def test_min_sessions_is_a_record_field_under_its_camel_name() -> None:
    assert validate_fields(ENVIRONMENT, {"minSessions": 4}) == {"minSessions": 4}
    settings, problems = apply_stored(ENVIRONMENT, {"minSessions": 4})
    assert (settings.min_sessions, settings.automatic_sessions, problems) == (4, True, [])
    assert settings.operator_fields()["minSessions"] == 4
    assert ENVIRONMENT.operator_fields()["minSessions"] is None


@pytest.mark.parametrize("value", [17, 0, -1, 4.0, "4", True])
def test_a_min_sessions_that_cannot_work_is_refused_naming_minsessions(value: object) -> None:
    with pytest.raises(SettingsError) as caught:
        validate_fields(ENVIRONMENT, {"minSessions": value})
    assert caught.value.field == "minSessions"
    assert "min_sessions" not in str(caught.value)


def test_a_min_sessions_is_judged_beside_the_sessions_sent_with_it() -> None:
    assert validate_fields(ENVIRONMENT, {"sessions": 32, "minSessions": 20})["minSessions"] == 20
    with pytest.raises(SettingsError) as caught:
        validate_fields(ENVIRONMENT, {"sessions": 4, "minSessions": 5})
    assert caught.value.field == "minSessions"
    assert "(sessions)" in caught.value.message


def test_a_stored_sessions_lowers_the_environments_min_and_null_unsets_it() -> None:
    environment = SchedulerSettings(sessions=16, min_sessions=8)
    settings, problems = apply_stored(environment, {"sessions": 4})
    assert (settings.sessions, settings.min_sessions, problems) == (4, 4, [])
    settings, problems = apply_stored(environment, {"minSessions": None})
    assert (settings.min_sessions, settings.automatic_sessions, problems) == (None, False, [])
    assert validate_fields(environment, {"minSessions": None}) == {"minSessions": None}
    assert apply_stored(environment, {})[0].min_sessions == 8


def test_a_stored_min_sessions_that_no_longer_fits_is_a_problem_named_in_camel_case() -> None:
    """Saved beside 16 slots, read on a server now configured for 8 (R-SET-6)."""
    environment = SchedulerSettings(sessions=8)
    settings, problems = apply_stored(environment, {"idleSeconds": 12, "minSessions": 12})
    assert settings == environment, "half of a change is never applied"
    assert len(problems) == 1
    assert "'minSessions'" in problems[0]


def test_record_diff_names_each_changed_field_with_absent_as_none() -> None:
    before = {"sessions": 8, "idleSeconds": 10}
    after = {"sessions": 8, "preempt": False}
    assert record_diff(before, after) == {
        "idleSeconds": {"from": 10, "to": None},
        "preempt": {"from": None, "to": False},
    }
    assert record_diff(after, after) == {}


def test_an_attempt_that_is_not_json_is_still_audited() -> None:
    text = attempted_json({"idleSeconds": {1, 2}})
    assert json.loads(text) == {"idleSeconds": "{1, 2}"}


def test_a_mismatch_entry_says_who_made_the_revision_it_met() -> None:
    entry = audit_entry(
        id=7,
        at=datetime(2026, 1, 1, tzinfo=UTC),
        actor="bob",
        outcome="revision_mismatch",
        expected_revision=3,
        revision=4,
        revision_by="alice",
        before='{"sessions": 8}',
        attempted='{"sessions": 9}',
        detail=None,
    )
    assert entry.outcome is AuditOutcome.REVISION_MISMATCH
    assert entry.detail is not None
    assert "revision 4" in entry.detail
    assert "alice" in entry.detail
    assert dict(entry.change) == {"sessions": {"from": 8, "to": 9}}
