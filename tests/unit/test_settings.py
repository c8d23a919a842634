"""Scheduler settings: defaults, derivations, validation, environment and R-SET-2 changes."""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
import re
from collections.abc import Callable
from datetime import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arkvory_sched._classes import DownloadClass
from arkvory_sched._exceptions import ConfigurationError, SettingsError
from arkvory_sched.policy import ClassSchedule, ClassWindow, Strategy
from arkvory_sched.settings._env import configuration_table
from arkvory_sched.settings._fields import FIELDS, SettingField
from arkvory_sched.settings._parsing import UnparsableError, parse_rate, parse_size
from arkvory_sched.settings._values import MIB, OPERATOR_FIELDS, SchedulerSettings

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "configuration.md"
FIELD_NAMES = tuple(f.name for f in dataclasses.fields(SchedulerSettings) if f.name[0] != "_")


def build(**values: object) -> SchedulerSettings:
    """Construct from untyped values, the way an operator record or a test of junk does."""
    constructor: Callable[..., SchedulerSettings] = SchedulerSettings
    return constructor(**values)


def assert_invariants(settings: SchedulerSettings) -> None:
    """Everything the scheduler core relies on without checking it again."""
    assert isinstance(settings.strategy, Strategy)
    for name in FIELD_NAMES:
        value = getattr(settings, name)
        if name in {"strategy", "weights", "preempt", "bandwidth", "min_sessions"}:
            continue
        if name in {"class_windows", "service_account_classes"}:
            assert type(value) is tuple, name  # immutable, hashable, checked once
            continue
        if name.endswith(("_seconds", "_minutes")):
            assert type(value) is float
            assert math.isfinite(value)
        else:
            assert type(value) is int, name
    assert 1 <= settings.sessions <= 65_536
    assert settings.min_sessions is None or (
        type(settings.min_sessions) is int and 1 <= settings.min_sessions <= settings.sessions
    )
    assert settings.automatic_sessions == (
        settings.min_sessions is not None and settings.min_sessions < settings.sessions
    )
    assert 0 <= settings.reserve <= settings.sessions - 1
    assert 1 <= settings.per_principal <= settings.sessions
    assert type(settings.weights) is tuple
    assert len(settings.weights) == 4
    assert all(type(w) is int and 1 <= w <= 1000 for w in settings.weights)
    assert settings.session_min_bytes >= 0
    assert 0 < settings.idle_seconds <= 3600
    assert 0 <= settings.aging_minutes <= 10_080
    assert type(settings.preempt) is bool
    assert 1 <= settings.ranges_per_session <= 64
    assert 1 <= settings.max_downloads <= 65_536
    assert 0 <= settings.transfer_queue_limit <= 1_048_576
    assert settings.transfer_queue_per_principal >= 1
    assert 0 <= settings.transfer_queue_wait_seconds <= 3600
    assert 0 <= settings.hold_seconds <= 3600
    assert 1 <= settings.queue_limit <= 1_048_576
    assert 1 <= settings.queue_per_principal <= settings.queue_limit
    assert settings.bandwidth is None or (
        type(settings.bandwidth) is int and settings.bandwidth >= 1
    )


# -- defaults and derivations -------------------------------------------------------------


def test_defaults_are_the_documented_ones() -> None:
    settings = SchedulerSettings()
    assert settings.strategy is Strategy.ORDERED
    assert settings.sessions == 16
    assert settings.min_sessions is None
    assert settings.automatic_sessions is False
    assert settings.reserve == 1
    assert settings.per_principal == 4
    assert settings.weights == (8, 4, 2, 1)
    assert settings.session_min_bytes == 16 * MIB
    assert settings.idle_seconds == 30.0
    assert settings.aging_minutes == 10.0
    assert settings.preempt is True
    assert settings.ranges_per_session == 4
    assert settings.max_downloads == 16
    assert settings.transfer_queue_limit == 64
    assert settings.transfer_queue_per_principal == 8
    assert settings.transfer_queue_wait_seconds == 20.0
    assert settings.hold_seconds == 20.0
    assert settings.queue_limit == 65_536
    assert settings.queue_per_principal == 4_096
    assert settings.bandwidth is None
    assert_invariants(settings)


@pytest.mark.parametrize(("sessions", "reserve"), [(1, 0), (2, 0), (3, 0), (4, 1), (64, 1)])
def test_reserve_defaults_to_one_slot_from_four_sessions(sessions: int, reserve: int) -> None:
    assert SchedulerSettings(sessions=sessions).reserve == reserve


@pytest.mark.parametrize(("sessions", "share"), [(1, 1), (3, 1), (4, 1), (8, 2), (16, 4), (65, 16)])
def test_per_principal_defaults_to_a_quarter_of_sessions_at_least_one(
    sessions: int, share: int
) -> None:
    assert SchedulerSettings(sessions=sessions).per_principal == share


def test_hold_defaults_to_the_per_request_wait() -> None:
    assert SchedulerSettings(transfer_queue_wait_seconds=7.5).hold_seconds == 7.5
    assert SchedulerSettings(transfer_queue_wait_seconds=7.5, hold_seconds=3).hold_seconds == 3.0


def test_derived_values_are_plain_numbers_the_core_can_count_with() -> None:
    settings = SchedulerSettings()
    assert settings.reserve + 1 == 2
    assert settings.per_principal * 2 == 8
    assert settings.hold_seconds / 2 == 10.0
    assert type(settings.reserve) is int
    assert type(settings.per_principal) is int
    assert type(settings.hold_seconds) is float


def test_derived_fields_are_reported_and_explicit_ones_are_not() -> None:
    assert SchedulerSettings().derived_fields == {"reserve", "per_principal", "hold_seconds"}
    assert SchedulerSettings(reserve=1, hold_seconds=5).derived_fields == {"per_principal"}


def test_explicit_values_equal_to_derived_ones_compare_equal() -> None:
    derived = SchedulerSettings()
    explicit = SchedulerSettings(reserve=1, per_principal=4, hold_seconds=20.0)
    assert derived == explicit
    assert hash(derived) == hash(explicit)


def test_repr_shows_resolved_values() -> None:
    text = repr(SchedulerSettings(sessions=2))
    assert "reserve=0" in text
    assert "per_principal=1" in text
    assert "_derived" not in text


def test_settings_are_immutable() -> None:
    settings = SchedulerSettings()
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.sessions = 3  # type: ignore[misc]


def test_weight_of_follows_the_class_order_most_urgent_first() -> None:
    settings = SchedulerSettings(weights=(40, 30, 20, 10))
    assert [settings.weight_of(cls) for cls in DownloadClass] == [40, 30, 20, 10]
    assert settings.weight_of(DownloadClass.BULK) == 20


def test_strategy_accepts_its_string_value() -> None:
    assert SchedulerSettings(strategy="smallest-first").strategy is Strategy.SMALLEST_FIRST
    assert SchedulerSettings(strategy="shared").strategy is Strategy.SHARED


def test_weights_given_as_a_list_are_stored_as_a_tuple() -> None:
    assert SchedulerSettings(weights=[5, 4, 3, 2]).weights == (5, 4, 3, 2)


def test_operator_fields_are_the_camel_case_record_and_json_ready() -> None:
    fields = SchedulerSettings(strategy=Strategy.SHARED, sessions=8).operator_fields()
    assert fields == {
        "strategy": "shared",
        "sessions": 8,
        "minSessions": None,
        "reserve": 1,
        "perPrincipal": 2,
        "weights": [8, 4, 2, 1],
        "sessionMinBytes": 16 * MIB,
        "idleSeconds": 30.0,
        "agingMinutes": 10.0,
        "preempt": True,
        "rangesPerSession": 4,
        "classWindows": {},
        "serviceAccountClasses": {},
    }
    assert json.loads(json.dumps(fields)) == fields
    assert list(fields) == list(OPERATOR_FIELDS)


def test_operator_fields_leave_out_environment_only_settings() -> None:
    assert set(OPERATOR_FIELDS.values()) == {
        "strategy",
        "sessions",
        "min_sessions",
        "reserve",
        "per_principal",
        "weights",
        "session_min_bytes",
        "idle_seconds",
        "aging_minutes",
        "preempt",
        "ranges_per_session",
        "class_windows",
        "service_account_classes",
    }


# -- validation ---------------------------------------------------------------------------

INVALID: list[tuple[str, dict[str, object]]] = [
    ("strategy", {"strategy": "fastest"}),
    ("strategy", {"strategy": "ORDERED"}),
    ("strategy", {"strategy": 1}),
    ("sessions", {"sessions": 0}),
    ("sessions", {"sessions": 65_537}),
    ("sessions", {"sessions": 4.0}),
    ("sessions", {"sessions": "16"}),
    ("min_sessions", {"min_sessions": 0}),
    ("min_sessions", {"min_sessions": 17}),
    ("min_sessions", {"sessions": 4, "min_sessions": 5}),
    ("min_sessions", {"min_sessions": 4.0}),
    ("min_sessions", {"min_sessions": "4"}),
    ("reserve", {"reserve": -1}),
    ("reserve", {"sessions": 4, "reserve": 4}),
    ("reserve", {"sessions": 1, "reserve": 1}),
    ("per_principal", {"per_principal": 0}),
    ("per_principal", {"sessions": 4, "per_principal": 5}),
    ("weights", {"weights": (8, 4, 2)}),
    ("weights", {"weights": (8, 4, 2, 1, 1)}),
    ("weights", {"weights": (8, 4, 2, 0)}),
    ("weights", {"weights": (1001, 4, 2, 1)}),
    ("weights", {"weights": (8, 4.5, 2, 1)}),
    ("weights", {"weights": "8421"}),
    ("weights", {"weights": 8}),
    ("session_min_bytes", {"session_min_bytes": -1}),
    ("idle_seconds", {"idle_seconds": 0}),
    ("idle_seconds", {"idle_seconds": -1.0}),
    ("idle_seconds", {"idle_seconds": 3600.5}),
    ("idle_seconds", {"idle_seconds": "30"}),
    ("aging_minutes", {"aging_minutes": -0.5}),
    ("aging_minutes", {"aging_minutes": 10_081}),
    ("preempt", {"preempt": 1}),
    ("preempt", {"preempt": "true"}),
    ("ranges_per_session", {"ranges_per_session": 0}),
    ("ranges_per_session", {"ranges_per_session": 65}),
    ("max_downloads", {"max_downloads": 0}),
    ("max_downloads", {"max_downloads": 65_537}),
    ("transfer_queue_limit", {"transfer_queue_limit": -1}),
    ("transfer_queue_limit", {"transfer_queue_limit": 1_048_577}),
    ("transfer_queue_per_principal", {"transfer_queue_per_principal": 0}),
    ("transfer_queue_wait_seconds", {"transfer_queue_wait_seconds": -0.1}),
    ("transfer_queue_wait_seconds", {"transfer_queue_wait_seconds": 3601}),
    ("hold_seconds", {"hold_seconds": -1}),
    ("hold_seconds", {"hold_seconds": 3601}),
    ("queue_limit", {"queue_limit": 0}),
    ("queue_limit", {"queue_limit": 1_048_577}),
    ("queue_per_principal", {"queue_per_principal": 0}),
    ("queue_per_principal", {"queue_limit": 10, "queue_per_principal": 11}),
    ("bandwidth", {"bandwidth": 0}),
    ("bandwidth", {"bandwidth": 1.5}),
]


@pytest.mark.parametrize(("field", "values"), INVALID)
def test_settings_that_cannot_work_are_refused_naming_the_field(
    field: str, values: dict[str, object]
) -> None:
    with pytest.raises(SettingsError) as caught:
        build(**values)
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}: ")
    assert not isinstance(caught.value, ConfigurationError)


VALID_EDGES: list[dict[str, object]] = [
    {"sessions": 1},
    {"sessions": 65_536},
    {"sessions": 4, "reserve": 3, "per_principal": 4},
    {"sessions": 4, "reserve": 0},
    {"min_sessions": 1},
    {"sessions": 4, "min_sessions": 4},
    {"sessions": 65_536, "min_sessions": 65_536},
    {"weights": (1, 1, 1, 1)},
    {"weights": (1000, 1000, 1000, 1000)},
    {"session_min_bytes": 0},
    {"idle_seconds": 0.001},
    {"idle_seconds": 3600},
    {"aging_minutes": 0},
    {"aging_minutes": 10_080},
    {"ranges_per_session": 1},
    {"ranges_per_session": 64},
    {"max_downloads": 1},
    {"max_downloads": 65_536},
    {"transfer_queue_limit": 0},
    {"transfer_queue_limit": 1_048_576},
    {"transfer_queue_wait_seconds": 0},
    {"transfer_queue_wait_seconds": 3600},
    {"hold_seconds": 0},
    {"hold_seconds": 3600},
    {"queue_limit": 1, "queue_per_principal": 1},
    {"queue_limit": 1_048_576, "queue_per_principal": 1_048_576},
    {"bandwidth": 1},
    {"preempt": False},
]


@pytest.mark.parametrize("values", VALID_EDGES)
def test_values_on_the_edge_of_their_range_are_accepted(values: dict[str, object]) -> None:
    assert_invariants(build(**values))


@pytest.mark.parametrize(
    "field",
    [
        "sessions",
        "min_sessions",
        "reserve",
        "per_principal",
        "max_downloads",
        "queue_limit",
        "bandwidth",
    ],
)
def test_a_bool_is_not_a_number(field: str) -> None:
    with pytest.raises(SettingsError) as caught:
        build(**{field: True})
    assert caught.value.field == field


def test_a_bool_is_not_a_weight() -> None:
    with pytest.raises(SettingsError, match="weight"):
        build(weights=(True, 4, 2, 1))


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize(
    "field", ["idle_seconds", "aging_minutes", "transfer_queue_wait_seconds", "hold_seconds"]
)
def test_durations_must_be_finite(field: str, value: float) -> None:
    with pytest.raises(SettingsError) as caught:
        build(**{field: value})
    assert caught.value.field == field


def test_a_bool_is_not_a_duration() -> None:
    with pytest.raises(SettingsError) as caught:
        build(idle_seconds=True)
    assert caught.value.field == "idle_seconds"


def test_validation_message_says_what_is_expected_and_what_was_given() -> None:
    with pytest.raises(SettingsError) as caught:
        SchedulerSettings(sessions=8, reserve=8)
    assert "from 0 to 7" in caught.value.message
    assert "got 8" in caught.value.message


def test_weight_error_names_the_class() -> None:
    with pytest.raises(SettingsError) as caught:
        SchedulerSettings(weights=(8, 4, 0, 1))
    assert "bulk" in caught.value.message


def test_a_long_bad_value_is_cut_in_the_message() -> None:
    with pytest.raises(SettingsError) as caught:
        build(strategy="x" * 500)
    assert "x" * 60 in caught.value.message
    assert "x" * 61 not in caught.value.message


# -- environment --------------------------------------------------------------------------


def test_an_empty_environment_gives_the_defaults() -> None:
    assert SchedulerSettings.from_env({}) == SchedulerSettings()
    assert SchedulerSettings.from_env({}).derived_fields == SchedulerSettings().derived_fields


def test_empty_or_blank_variables_keep_the_default() -> None:
    environ = {setting.variable: "" for setting in FIELDS}
    environ["ARKVORY_DOWNLOAD_RESERVE"] = "   "
    assert SchedulerSettings.from_env(environ) == SchedulerSettings()


def test_from_env_reads_the_process_environment_by_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ARKVORY_DOWNLOAD_STRATEGY", "shared")
    assert SchedulerSettings.from_env().strategy is Strategy.SHARED


ENV_VALUES: list[tuple[str, str, str, object]] = [
    (
        "ARKVORY_DOWNLOAD_CLASS_WINDOWS",
        '{"bulk": {"windows": [{"weekdays": ["sat", "sun"], "start": "00:00", '
        '"end": "23:59", "zone": "UTC"}], "outsideShare": 0.25}}',
        "class_windows",
        (
            (
                DownloadClass.BULK,
                ClassSchedule(
                    (ClassWindow(frozenset({5, 6}), time(0, 0), time(23, 59), "UTC"),), 0.25
                ),
            ),
        ),
    ),
    (
        "ARKVORY_SERVICE_ACCOUNT_CLASSES",
        '{"ci-bot": "bulk", "mirror": "background"}',
        "service_account_classes",
        (("ci-bot", DownloadClass.BULK), ("mirror", DownloadClass.BACKGROUND)),
    ),
    ("ARKVORY_DOWNLOAD_STRATEGY", "smallest-first", "strategy", Strategy.SMALLEST_FIRST),
    ("ARKVORY_DOWNLOAD_STRATEGY", " Shared ", "strategy", Strategy.SHARED),
    ("ARKVORY_MAX_DOWNLOAD_SESSIONS", "32", "sessions", 32),
    ("ARKVORY_MIN_DOWNLOAD_SESSIONS", "4", "min_sessions", 4),
    ("ARKVORY_MIN_DOWNLOAD_SESSIONS", " 16 ", "min_sessions", 16),
    ("ARKVORY_MAX_DOWNLOADS", "24", "max_downloads", 24),
    ("ARKVORY_TRANSFER_QUEUE_LIMIT", "0", "transfer_queue_limit", 0),
    ("ARKVORY_TRANSFER_QUEUE_PER_PRINCIPAL", "3", "transfer_queue_per_principal", 3),
    ("ARKVORY_TRANSFER_QUEUE_WAIT_SECONDS", "12.5", "transfer_queue_wait_seconds", 12.5),
    ("ARKVORY_DOWNLOAD_HOLD_SECONDS", "45", "hold_seconds", 45.0),
    ("ARKVORY_DOWNLOAD_SESSION_MIN_BYTES", "1048576", "session_min_bytes", MIB),
    ("ARKVORY_DOWNLOAD_RESERVE", "2", "reserve", 2),
    ("ARKVORY_MAX_DOWNLOADS_PER_PRINCIPAL", "6", "per_principal", 6),
    ("ARKVORY_DOWNLOAD_WEIGHTS", "10,5,2,1", "weights", (10, 5, 2, 1)),
    ("ARKVORY_DOWNLOAD_WEIGHTS", " 10 , 5,2 ,1 ", "weights", (10, 5, 2, 1)),
    ("ARKVORY_DOWNLOAD_IDLE_SECONDS", "5", "idle_seconds", 5.0),
    ("ARKVORY_DOWNLOAD_IDLE_SECONDS", ".5", "idle_seconds", 0.5),
    ("ARKVORY_DOWNLOAD_AGING_MINUTES", "0", "aging_minutes", 0.0),
    ("ARKVORY_DOWNLOAD_PREEMPT", "false", "preempt", False),
    ("ARKVORY_DOWNLOAD_RANGES_PER_SESSION", "8", "ranges_per_session", 8),
    ("ARKVORY_DOWNLOAD_QUEUE_LIMIT", "1048576", "queue_limit", 1_048_576),
    ("ARKVORY_DOWNLOAD_QUEUE_PER_PRINCIPAL", "100", "queue_per_principal", 100),
    ("ARKVORY_DOWNLOAD_BANDWIDTH", "125000000", "bandwidth", 125_000_000),
    ("ARKVORY_DOWNLOAD_BANDWIDTH", "125MB/s", "bandwidth", 125_000_000),
]


@pytest.mark.parametrize(("variable", "text", "field", "expected"), ENV_VALUES)
def test_each_variable_sets_its_field(
    variable: str, text: str, field: str, expected: object
) -> None:
    assert getattr(SchedulerSettings.from_env({variable: text}), field) == expected


def test_every_variable_is_read() -> None:
    read = {variable for variable, _, _, _ in ENV_VALUES}
    assert read == {setting.variable for setting in FIELDS}


def test_session_slots_default_to_max_downloads() -> None:
    settings = SchedulerSettings.from_env({"ARKVORY_MAX_DOWNLOADS": "8"})
    assert settings.sessions == 8
    assert settings.max_downloads == 8
    assert settings.per_principal == 2


def test_session_slots_variable_wins_over_max_downloads() -> None:
    environ = {"ARKVORY_MAX_DOWNLOADS": "8", "ARKVORY_MAX_DOWNLOAD_SESSIONS": "100"}
    settings = SchedulerSettings.from_env(environ)
    assert (settings.sessions, settings.max_downloads) == (100, 8)


def test_derived_environment_defaults_follow_the_configured_sessions() -> None:
    settings = SchedulerSettings.from_env({"ARKVORY_MAX_DOWNLOAD_SESSIONS": "2"})
    assert (settings.reserve, settings.per_principal) == (0, 1)
    assert settings.derived_fields == {"reserve", "per_principal", "hold_seconds"}


def test_hold_follows_the_configured_per_request_wait() -> None:
    settings = SchedulerSettings.from_env({"ARKVORY_TRANSFER_QUEUE_WAIT_SECONDS": "5"})
    assert settings.hold_seconds == 5.0


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("0", 0),
        ("16777216", 16 * MIB),
        ("16MiB", 16 * MIB),
        ("16 MiB", 16 * MIB),
        ("16 MIB", 16 * MIB),
        ("1KiB", 1024),
        ("2GiB", 2 * 1024**3),
        ("1TiB", 1024**4),
        ("40 MB", 40_000_000),
        ("40MB", 40_000_000),
        ("3KB", 3000),
        ("3kB", 3000),
        ("1GB", 1_000_000_000),
        ("1.5GiB", 1536 * MIB),
        ("512B", 512),
    ],
)
def test_byte_sizes_accept_plain_bytes_and_units(text: str, size: int) -> None:
    settings = SchedulerSettings.from_env({"ARKVORY_DOWNLOAD_SESSION_MIN_BYTES": text})
    assert settings.session_min_bytes == size


@pytest.mark.parametrize("text", ["1Gb", "16Mib", "16mb", "16 XB", "16 MiB/s", "0.5B", "-1", "1e6"])
def test_byte_sizes_in_bits_or_unknown_units_are_refused(text: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        SchedulerSettings.from_env({"ARKVORY_DOWNLOAD_SESSION_MIN_BYTES": text})
    assert caught.value.variable == "ARKVORY_DOWNLOAD_SESSION_MIN_BYTES"


def test_bits_are_refused_with_a_hint() -> None:
    with pytest.raises(ConfigurationError, match="bits"):
        SchedulerSettings.from_env({"ARKVORY_DOWNLOAD_BANDWIDTH": "1Gb/s"})


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("true", True),
        ("TRUE", True),
        ("1", True),
        ("yes", True),
        ("On", True),
        ("false", False),
        ("False", False),
        ("0", False),
        ("no", False),
        ("OFF", False),
    ],
)
def test_preempt_accepts_the_usual_booleans(text: str, value: bool) -> None:
    assert SchedulerSettings.from_env({"ARKVORY_DOWNLOAD_PREEMPT": text}).preempt is value


BAD_ENV: list[tuple[str, str, str]] = [
    ("ARKVORY_DOWNLOAD_CLASS_WINDOWS", "{bulk}", "class_windows"),
    (
        "ARKVORY_DOWNLOAD_CLASS_WINDOWS",
        '{"bulk": {"windows": [], "outsideShare": 2}}',
        "class_windows/bulk/outsideShare",
    ),
    ("ARKVORY_SERVICE_ACCOUNT_CLASSES", '{"ci-bot": "urgent"}', "service_account_classes/ci-bot"),
    ("ARKVORY_DOWNLOAD_STRATEGY", "fastest", "strategy"),
    ("ARKVORY_MAX_DOWNLOAD_SESSIONS", "sixteen", "sessions"),
    ("ARKVORY_MAX_DOWNLOAD_SESSIONS", "0", "sessions"),
    ("ARKVORY_MAX_DOWNLOAD_SESSIONS", "16.0", "sessions"),
    ("ARKVORY_MIN_DOWNLOAD_SESSIONS", "17", "min_sessions"),
    ("ARKVORY_MIN_DOWNLOAD_SESSIONS", "0", "min_sessions"),
    ("ARKVORY_MIN_DOWNLOAD_SESSIONS", "some", "min_sessions"),
    ("ARKVORY_MAX_DOWNLOADS", "-3", "max_downloads"),
    ("ARKVORY_MAX_DOWNLOADS", "lots", "max_downloads"),
    ("ARKVORY_TRANSFER_QUEUE_LIMIT", "2000000", "transfer_queue_limit"),
    ("ARKVORY_TRANSFER_QUEUE_PER_PRINCIPAL", "0", "transfer_queue_per_principal"),
    ("ARKVORY_TRANSFER_QUEUE_WAIT_SECONDS", "20s", "transfer_queue_wait_seconds"),
    ("ARKVORY_TRANSFER_QUEUE_WAIT_SECONDS", "nan", "transfer_queue_wait_seconds"),
    ("ARKVORY_DOWNLOAD_HOLD_SECONDS", "inf", "hold_seconds"),
    ("ARKVORY_DOWNLOAD_HOLD_SECONDS", "9999", "hold_seconds"),
    ("ARKVORY_DOWNLOAD_SESSION_MIN_BYTES", "16 megs", "session_min_bytes"),
    ("ARKVORY_DOWNLOAD_RESERVE", "16", "reserve"),
    ("ARKVORY_DOWNLOAD_RESERVE", "one", "reserve"),
    ("ARKVORY_MAX_DOWNLOADS_PER_PRINCIPAL", "17", "per_principal"),
    ("ARKVORY_DOWNLOAD_WEIGHTS", "8,4,2", "weights"),
    ("ARKVORY_DOWNLOAD_WEIGHTS", "8 4 2 1", "weights"),
    ("ARKVORY_DOWNLOAD_WEIGHTS", "8,4,2,0", "weights"),
    ("ARKVORY_DOWNLOAD_IDLE_SECONDS", "0", "idle_seconds"),
    ("ARKVORY_DOWNLOAD_AGING_MINUTES", "-1", "aging_minutes"),
    ("ARKVORY_DOWNLOAD_AGING_MINUTES", "1e3", "aging_minutes"),
    ("ARKVORY_DOWNLOAD_PREEMPT", "maybe", "preempt"),
    ("ARKVORY_DOWNLOAD_RANGES_PER_SESSION", "65", "ranges_per_session"),
    ("ARKVORY_DOWNLOAD_QUEUE_LIMIT", "0", "queue_limit"),
    ("ARKVORY_DOWNLOAD_QUEUE_PER_PRINCIPAL", "70000", "queue_per_principal"),
    ("ARKVORY_DOWNLOAD_BANDWIDTH", "0", "bandwidth"),
    ("ARKVORY_DOWNLOAD_BANDWIDTH", "fast", "bandwidth"),
]


@pytest.mark.parametrize(("variable", "text", "field"), BAD_ENV)
def test_bad_environment_value_names_the_variable(variable: str, text: str, field: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        SchedulerSettings.from_env({variable: text})
    error = caught.value
    assert error.variable == variable
    assert error.field == field
    assert variable in error.message
    assert repr(text) in error.message
    assert str(error).startswith(f"{variable}: ")
    assert isinstance(error, SettingsError)


def test_every_variable_has_a_bad_value_test() -> None:
    tested = {variable for variable, _, _ in BAD_ENV}
    assert tested == {setting.variable for setting in FIELDS}


def test_unparsable_environment_value_says_what_is_expected() -> None:
    with pytest.raises(ConfigurationError) as caught:
        SchedulerSettings.from_env({"ARKVORY_DOWNLOAD_PREEMPT": "maybe"})
    assert "true or false" in caught.value.message


def test_a_long_bad_environment_value_is_cut_to_sixty_characters() -> None:
    value = "9" * 40 + "x" * 200
    with pytest.raises(ConfigurationError) as caught:
        SchedulerSettings.from_env({"ARKVORY_DOWNLOAD_RESERVE": value})
    assert value[:60] in caught.value.message
    assert value[:61] not in caught.value.message


def test_session_slots_taken_from_max_downloads_blame_max_downloads() -> None:
    with pytest.raises(ConfigurationError) as caught:
        SchedulerSettings.from_env({"ARKVORY_MAX_DOWNLOADS": "70000"})
    assert caught.value.variable == "ARKVORY_MAX_DOWNLOADS"


def test_a_variable_that_breaks_a_default_is_blamed_and_the_other_named() -> None:
    with pytest.raises(ConfigurationError) as caught:
        SchedulerSettings.from_env({"ARKVORY_DOWNLOAD_QUEUE_LIMIT": "100"})
    assert caught.value.variable == "ARKVORY_DOWNLOAD_QUEUE_LIMIT"
    assert "ARKVORY_DOWNLOAD_QUEUE_PER_PRINCIPAL" in caught.value.message


def test_reserve_that_does_not_fit_configured_sessions_blames_the_reserve() -> None:
    environ = {"ARKVORY_MAX_DOWNLOAD_SESSIONS": "2", "ARKVORY_DOWNLOAD_RESERVE": "2"}
    with pytest.raises(ConfigurationError) as caught:
        SchedulerSettings.from_env(environ)
    assert caught.value.variable == "ARKVORY_DOWNLOAD_RESERVE"
    assert "from 0 to 1" in caught.value.message


def test_every_setting_has_exactly_one_variable() -> None:
    fields = [setting.name for setting in FIELDS]
    assert sorted(fields) == sorted(FIELD_NAMES)
    names = [setting.variable for setting in FIELDS]
    assert len(set(names)) == len(names)
    assert all(re.fullmatch(r"ARKVORY_[A-Z_]+", name) for name in names)


def test_the_field_list_is_the_dataclass_in_the_same_order() -> None:
    assert tuple(setting.name for setting in FIELDS) == FIELD_NAMES


def test_the_constructor_takes_exactly_the_fields() -> None:
    parameters = inspect.signature(SchedulerSettings).parameters
    assert tuple(parameters) == FIELD_NAMES
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters.values())


def test_fields_that_follow_a_rule_are_the_ones_with_an_optional_keyword() -> None:
    parameters = inspect.signature(SchedulerSettings).parameters
    optional = {name for name, p in parameters.items() if p.default is None}
    unset = {"bandwidth", "min_sessions"}  # None is "not set", no rule
    assert optional == {setting.name for setting in FIELDS if setting.derive} | unset


def test_each_field_depends_only_on_fields_checked_before_it() -> None:
    seen: set[str] = set()
    for setting in FIELDS:
        for other in (setting.depends_on, setting.falls_back_to):
            assert other is None or other in FIELD_NAMES, setting.name
        if setting.depends_on is not None:
            assert setting.depends_on in seen, setting.name
        seen.add(setting.name)


def test_a_running_scheduler_keeps_what_sizes_memory_and_takes_the_rest() -> None:
    running = SchedulerSettings(queue_limit=100, queue_per_principal=10, max_downloads=3)
    new = SchedulerSettings(sessions=8, bandwidth=1000, transfer_queue_wait_seconds=5)
    kept = new.keeping_environment_only(running)
    assert (kept.queue_limit, kept.queue_per_principal, kept.max_downloads) == (100, 10, 3)
    assert kept.transfer_queue_wait_seconds == running.transfer_queue_wait_seconds
    assert kept.hold_seconds == running.hold_seconds
    assert (kept.sessions, kept.bandwidth) == (8, 1000)


def test_a_size_in_bits_is_refused_saying_why() -> None:
    with pytest.raises(UnparsableError) as caught:
        parse_rate("40Mb/s")
    assert "bits" in caught.value.expected
    assert parse_rate("40MB/s") == parse_size("40 MB") == 40_000_000


# -- documentation ------------------------------------------------------------------------


def test_configuration_doc_lists_every_variable() -> None:
    text = DOC.read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(ARKVORY_[A-Z_]+)` \|", text, flags=re.MULTILINE)
    assert rows == [setting.variable for setting in FIELDS]


def test_configuration_doc_table_is_the_generated_one() -> None:
    assert configuration_table() in DOC.read_text(encoding="utf-8")


def test_readme_configuration_table_is_the_generated_one() -> None:
    assert configuration_table() in (ROOT / "README.md").read_text(encoding="utf-8")


# -- changes (R-SET-2) --------------------------------------------------------------------


def test_no_changes_returns_the_same_settings() -> None:
    settings = SchedulerSettings.from_env({"ARKVORY_DOWNLOAD_RESERVE": "3"})
    assert settings.with_changes() == settings
    assert settings.with_changes().derived_fields == settings.derived_fields


def test_a_change_applies_only_the_given_fields() -> None:
    changed = SchedulerSettings().with_changes(strategy="shared", preempt=False, idle_seconds=5)
    assert changed.strategy is Strategy.SHARED
    assert changed.preempt is False
    assert changed.idle_seconds == 5.0
    assert dataclasses.replace(
        changed, strategy=Strategy.ORDERED, preempt=True, idle_seconds=30
    ) == (SchedulerSettings())


def test_unknown_setting_is_refused_by_name() -> None:
    with pytest.raises(SettingsError) as caught:
        SchedulerSettings().with_changes(perPrincipal=2)
    assert caught.value.field == "perPrincipal"
    assert "per_principal" in caught.value.message


def test_invalid_change_names_the_field() -> None:
    with pytest.raises(SettingsError) as caught:
        SchedulerSettings().with_changes(ranges_per_session=0)
    assert caught.value.field == "ranges_per_session"


@pytest.mark.parametrize("sessions", [0, -1, True, "8", 8.0, None])
def test_invalid_sessions_change_names_sessions(sessions: object) -> None:
    with pytest.raises(SettingsError) as caught:
        SchedulerSettings().with_changes(sessions=sessions)
    assert caught.value.field == "sessions"


def test_sessions_change_lowers_reserve_never_raises() -> None:
    explicit = SchedulerSettings(sessions=16, reserve=6, per_principal=12)
    lowered = explicit.with_changes(sessions=4)
    assert (lowered.reserve, lowered.per_principal) == (3, 4)
    raised = lowered.with_changes(sessions=64)
    assert (raised.reserve, raised.per_principal) == (3, 4)


def test_sessions_change_keeps_explicit_values_that_still_fit() -> None:
    settings = SchedulerSettings(sessions=16, reserve=2, per_principal=3)
    changed = settings.with_changes(sessions=8)
    assert (changed.reserve, changed.per_principal) == (2, 3)


def test_derived_reserve_drops_to_zero_below_four_sessions() -> None:
    changed = SchedulerSettings().with_changes(sessions=2)
    assert (changed.reserve, changed.per_principal) == (0, 1)
    assert {"reserve", "per_principal"} <= changed.derived_fields


def test_derived_share_follows_fewer_sessions() -> None:
    assert SchedulerSettings().with_changes(sessions=8).per_principal == 2


def test_more_sessions_do_not_silently_raise_derived_values() -> None:
    changed = SchedulerSettings(sessions=4).with_changes(sessions=64)
    assert (changed.reserve, changed.per_principal) == (1, 1)


def test_reserve_given_with_sessions_is_checked_against_the_new_sessions() -> None:
    settings = SchedulerSettings()
    assert settings.with_changes(sessions=4, reserve=3).reserve == 3
    with pytest.raises(SettingsError) as caught:
        settings.with_changes(sessions=4, reserve=4)
    assert caught.value.field == "reserve"


def test_per_principal_given_with_sessions_is_used_as_given() -> None:
    changed = SchedulerSettings().with_changes(sessions=64, per_principal=32)
    assert changed.per_principal == 32
    assert changed.reserve == 1


def test_none_returns_a_field_to_its_rule() -> None:
    settings = SchedulerSettings(sessions=64, reserve=5, per_principal=2, hold_seconds=3)
    back = settings.with_changes(reserve=None, per_principal=None, hold_seconds=None)
    assert (back.reserve, back.per_principal, back.hold_seconds) == (1, 16, 20.0)
    assert back.derived_fields == {"reserve", "per_principal", "hold_seconds"}


def test_explicit_change_of_a_derived_field_makes_it_explicit() -> None:
    changed = SchedulerSettings().with_changes(reserve=2)
    assert "reserve" not in changed.derived_fields
    assert changed.with_changes(sessions=2).reserve == 1


def test_weights_are_changed_all_four_at_once() -> None:
    settings = SchedulerSettings()
    assert settings.with_changes(weights=[16, 8, 4, 2]).weights == (16, 8, 4, 2)
    with pytest.raises(SettingsError) as caught:
        settings.with_changes(weights=[16, 8])
    assert caught.value.field == "weights"


def test_derived_hold_follows_a_changed_wait_but_an_explicit_one_stays() -> None:
    assert SchedulerSettings().with_changes(transfer_queue_wait_seconds=5).hold_seconds == 5.0
    explicit = SchedulerSettings(hold_seconds=40)
    assert explicit.with_changes(transfer_queue_wait_seconds=5).hold_seconds == 40.0


def test_an_empty_operator_record_returns_to_the_environment() -> None:
    environment = SchedulerSettings.from_env({"ARKVORY_MAX_DOWNLOAD_SESSIONS": "32"})
    record: dict[str, Any] = {}
    assert environment.with_changes(**record) == environment


# -- fewest sessions (ADR 0038) ------------------------------------------------------------


def test_min_sessions_is_unset_by_default_and_the_count_fixed() -> None:
    for settings in (SchedulerSettings(), SchedulerSettings.from_env({})):
        assert settings.min_sessions is None
        assert settings.automatic_sessions is False
        assert "min_sessions" not in settings.derived_fields  # unset, not a rule


def test_min_sessions_variable_is_read_and_the_slots_size_themselves() -> None:
    environ = {"ARKVORY_MIN_DOWNLOAD_SESSIONS": "4", "ARKVORY_MAX_DOWNLOAD_SESSIONS": "32"}
    settings = SchedulerSettings.from_env(environ)
    assert (settings.min_sessions, settings.sessions) == (4, 32)
    assert settings.automatic_sessions is True


def test_min_sessions_equal_to_sessions_is_a_fixed_count() -> None:
    settings = SchedulerSettings(sessions=8, min_sessions=8)
    assert settings.min_sessions == 8
    assert settings.automatic_sessions is False
    assert SchedulerSettings(sessions=8, min_sessions=7).automatic_sessions is True


def test_min_sessions_above_sessions_is_refused_naming_the_bound() -> None:
    with pytest.raises(SettingsError) as caught:
        SchedulerSettings(sessions=8, min_sessions=9)
    assert caught.value.field == "min_sessions"
    assert "from 1 to 8 (sessions)" in caught.value.message
    assert "got 9" in caught.value.message


@pytest.mark.parametrize(
    "environ",
    [
        {"ARKVORY_MIN_DOWNLOAD_SESSIONS": "20"},
        {"ARKVORY_MIN_DOWNLOAD_SESSIONS": "8", "ARKVORY_MAX_DOWNLOAD_SESSIONS": "4"},
        {"ARKVORY_MIN_DOWNLOAD_SESSIONS": "8", "ARKVORY_MAX_DOWNLOADS": "4"},
    ],
)
def test_min_sessions_variable_above_the_slots_blames_the_min(environ: dict[str, str]) -> None:
    with pytest.raises(ConfigurationError) as caught:
        SchedulerSettings.from_env(environ)
    assert caught.value.variable == "ARKVORY_MIN_DOWNLOAD_SESSIONS"
    assert caught.value.field == "min_sessions"
    assert "(sessions)" in caught.value.message


def test_lowering_sessions_below_the_min_lowers_the_min_never_raises_it() -> None:
    settings = SchedulerSettings(sessions=16, min_sessions=8)
    lowered = settings.with_changes(sessions=4)
    assert (lowered.sessions, lowered.min_sessions) == (4, 4)
    assert lowered.automatic_sessions is False  # lowered onto the ceiling: a fixed count
    raised = lowered.with_changes(sessions=32)
    assert (raised.min_sessions, raised.automatic_sessions) == (4, True)


def test_a_min_that_still_fits_the_new_sessions_is_kept_and_unset_stays_unset() -> None:
    assert SchedulerSettings(sessions=16, min_sessions=4).with_changes(sessions=8).min_sessions == 4
    assert SchedulerSettings().with_changes(sessions=4).min_sessions is None


def test_min_given_with_sessions_is_checked_against_the_new_sessions() -> None:
    settings = SchedulerSettings(sessions=16)
    assert settings.with_changes(sessions=32, min_sessions=20).min_sessions == 20
    with pytest.raises(SettingsError) as caught:
        settings.with_changes(sessions=4, min_sessions=5)
    assert caught.value.field == "min_sessions"


def test_none_unsets_the_min() -> None:
    unset = SchedulerSettings(min_sessions=4).with_changes(min_sessions=None)
    assert unset.min_sessions is None
    assert unset.automatic_sessions is False


# -- properties ---------------------------------------------------------------------------

JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),
    st.text(max_size=80),
    st.lists(st.integers(min_value=-5, max_value=1005), max_size=6),
    st.sampled_from([*Strategy, "ordered", "fastest"]),
)
DEPENDENTS = {
    "sessions": {"min_sessions", "reserve", "per_principal"},
    "queue_limit": {"queue_per_principal"},
}


@st.composite
def valid_values(draw: st.DrawFn) -> dict[str, object]:
    sessions = draw(st.integers(min_value=1, max_value=65_536))
    queue_limit = draw(st.integers(min_value=1, max_value=1_048_576))
    seconds = st.floats(min_value=0, max_value=3600)
    return {
        "strategy": draw(st.sampled_from([*Strategy, *(s.value for s in Strategy)])),
        "sessions": sessions,
        "min_sessions": draw(st.none() | st.integers(min_value=1, max_value=sessions)),
        "reserve": draw(st.none() | st.integers(min_value=0, max_value=sessions - 1)),
        "per_principal": draw(st.none() | st.integers(min_value=1, max_value=sessions)),
        "weights": draw(
            st.tuples(*[st.integers(min_value=1, max_value=1000)] * 4)
            | st.lists(st.integers(min_value=1, max_value=1000), min_size=4, max_size=4)
        ),
        "session_min_bytes": draw(st.integers(min_value=0, max_value=2**50)),
        "idle_seconds": draw(st.floats(min_value=0, max_value=3600, exclude_min=True)),
        "aging_minutes": draw(st.floats(min_value=0, max_value=10_080)),
        "preempt": draw(st.booleans()),
        "ranges_per_session": draw(st.integers(min_value=1, max_value=64)),
        "max_downloads": draw(st.integers(min_value=1, max_value=65_536)),
        "transfer_queue_limit": draw(st.integers(min_value=0, max_value=1_048_576)),
        "transfer_queue_per_principal": draw(st.integers(min_value=1, max_value=10_000)),
        "transfer_queue_wait_seconds": draw(seconds),
        "hold_seconds": draw(st.none() | seconds),
        "queue_limit": queue_limit,
        "queue_per_principal": draw(st.integers(min_value=1, max_value=queue_limit)),
        "bandwidth": draw(st.none() | st.integers(min_value=1, max_value=2**40)),
    }


@given(values=valid_values(), mutated=st.none() | st.sampled_from(FIELD_NAMES), junk=JUNK)
def test_any_settings_that_construct_satisfy_every_invariant(
    values: dict[str, object], mutated: str | None, junk: object
) -> None:
    if mutated is not None:
        values[mutated] = junk
    try:
        settings = build(**values)
    except SettingsError as error:
        assert mutated is not None
        assert error.field in {mutated} | DEPENDENTS.get(mutated, set())
        assert error.message
    else:
        assert_invariants(settings)
        assert settings.with_changes() == settings
        assert SchedulerSettings(**_typed(settings)) == settings


def _typed(settings: SchedulerSettings) -> dict[str, Any]:
    return {name: getattr(settings, name) for name in FIELD_NAMES}


@given(values=valid_values(), sessions=st.integers(min_value=1, max_value=65_536))
def test_sessions_change_always_fits_and_never_raises_reserve_or_share(
    values: dict[str, object], sessions: int
) -> None:
    before = build(**values)
    after = before.with_changes(sessions=sessions)
    assert_invariants(after)
    assert after.sessions == sessions
    assert after.reserve <= before.reserve
    assert after.per_principal <= before.per_principal
    # Set stays set (lowered onto the new sessions at most), unset stays unset.
    if before.min_sessions is None:
        assert after.min_sessions is None
    else:
        assert after.min_sessions == min(before.min_sessions, sessions)
    unchanged = set(FIELD_NAMES) - {"sessions", "min_sessions", "reserve", "per_principal"}
    assert all(getattr(after, name) == getattr(before, name) for name in unchanged)
    assert after.derived_fields == before.derived_fields


@given(
    number=st.integers(min_value=0, max_value=10**6),
    unit=st.sampled_from(["", "B", "KiB", "MiB", "GiB", "KB", "MB", "GB", "kB"]),
    space=st.sampled_from(["", " "]),
)
def test_a_byte_size_is_its_number_times_its_unit(number: int, unit: str, space: str) -> None:
    factors = {"": 1, "B": 1, "KiB": 1024, "MiB": MIB, "GiB": 1024**3, "KB": 1000, "kB": 1000}
    factors |= {"MB": 1000**2, "GB": 1000**3}
    text = f"{number}{space}{unit}" if unit else str(number)
    settings = SchedulerSettings.from_env({"ARKVORY_DOWNLOAD_SESSION_MIN_BYTES": text})
    assert settings.session_min_bytes == number * factors[unit]


@given(setting=st.sampled_from(FIELDS), text=st.text(max_size=100))
def test_any_environment_text_gives_settings_or_a_named_error(
    setting: SettingField, text: str
) -> None:
    try:
        settings = SchedulerSettings.from_env({setting.variable: text})
    except ConfigurationError as error:
        assert error.variable == setting.variable
        assert error.variable in error.message
    else:
        assert_invariants(settings)
