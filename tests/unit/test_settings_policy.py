"""Class windows and service-account classes as settings: checks, paths, JSON round trip."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from arkvory_sched import DownloadClass, PrincipalKind, SchedulerSettings, SettingsError

BULK_NIGHTS = {
    "bulk": {
        "windows": [
            {"weekdays": ["mon", "tue"], "start": "22:00", "end": "06:00", "zone": "Europe/Berlin"}
        ],
        "outsideShare": 0.25,
    }
}


def build(**values: object) -> SchedulerSettings:
    constructor: Callable[..., SchedulerSettings] = SchedulerSettings
    return constructor(**values)


def test_windows_round_trip_through_the_record_shape() -> None:
    settings = build(class_windows=BULK_NIGHTS)
    shown = settings.operator_fields()["classWindows"]
    assert shown == BULK_NIGHTS
    assert build(class_windows=json.loads(json.dumps(shown))) == settings
    schedule = settings.schedule_of(DownloadClass.BULK)
    assert schedule is not None and schedule.outside_share == 0.25
    assert settings.schedule_of(DownloadClass.RELEASE) is None


def test_a_class_with_no_windows_is_not_scheduled() -> None:
    settings = build(class_windows={"bulk": {"windows": []}})
    assert settings.class_windows == ()
    assert settings.schedule_of(DownloadClass.BULK) is None


def test_other_changes_keep_the_windows() -> None:
    settings = build(class_windows=BULK_NIGHTS, service_account_classes={"ci": "bulk"})
    changed = settings.with_changes(sessions=8)
    assert changed.class_windows == settings.class_windows
    assert changed.service_account_classes == settings.service_account_classes


@pytest.mark.parametrize(
    ("value", "field"),
    [
        pytest.param([], "class_windows", id="not-an-object"),
        pytest.param({"urgent": {"windows": []}}, "class_windows/urgent", id="unknown-class"),
        pytest.param(
            {"interactive": {"windows": []}}, "class_windows/interactive", id="people-have-none"
        ),
        pytest.param({"bulk": []}, "class_windows/bulk", id="entry-not-an-object"),
        pytest.param({"bulk": {"hours": []}}, "class_windows/bulk/hours", id="unknown-key"),
        pytest.param(
            {"bulk": {"windows": [], "outsideShare": 1.5}},
            "class_windows/bulk/outsideShare",
            id="share-above-one",
        ),
        pytest.param(
            {"bulk": {"windows": [], "outsideShare": True}},
            "class_windows/bulk/outsideShare",
            id="share-boolean",
        ),
        pytest.param(
            {"bulk": {"windows": [{"weekdays": ["mon"], "start": "22:00", "end": "06:00"}]}},
            "class_windows/bulk/windows/0/zone",
            id="zone-missing",
        ),
        pytest.param(
            {
                "bulk": {
                    "windows": [
                        {"weekdays": ["mon"], "start": "25:00", "end": "06:00", "zone": "UTC"}
                    ]
                }
            },
            "class_windows/bulk/windows/0/start",
            id="hour-out-of-range",
        ),
    ],
)
def test_bad_windows_name_the_spot(value: object, field: str) -> None:
    with pytest.raises(SettingsError) as caught:
        build(class_windows=value)
    assert caught.value.field == field


@pytest.mark.parametrize(
    ("value", "field"),
    [
        pytest.param(["ci"], "service_account_classes", id="not-an-object"),
        pytest.param({"ci": "urgent"}, "service_account_classes/ci", id="unknown-class"),
        pytest.param({"ci": 2}, "service_account_classes/ci", id="not-a-name"),
        pytest.param({"": "bulk"}, "service_account_classes/", id="empty-principal"),
        pytest.param({"x" * 257: "bulk"}, "service_account_classes/" + "x" * 257, id="too-long"),
    ],
)
def test_bad_service_account_classes_name_the_spot(value: object, field: str) -> None:
    with pytest.raises(SettingsError) as caught:
        build(service_account_classes=value)
    assert caught.value.field == field


def test_the_base_class_of_a_principal() -> None:
    settings = build(service_account_classes={"mirror": "background", "link-1": "bulk"})
    assert settings.base_class_of("mirror", PrincipalKind.SERVICE, None) is (
        DownloadClass.BACKGROUND
    )
    assert settings.base_class_of("link-1", PrincipalKind.LINK, DownloadClass.RELEASE) is (
        DownloadClass.BULK
    )
    assert settings.base_class_of("other", PrincipalKind.SERVICE, None) is DownloadClass.RELEASE
    assert settings.base_class_of("other", PrincipalKind.SERVICE, DownloadClass.BULK) is (
        DownloadClass.BULK
    )
    assert settings.base_class_of("mirror", PrincipalKind.PERSON, None) is (
        DownloadClass.INTERACTIVE
    )
