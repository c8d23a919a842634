"""Today's and tomorrow's windows for the page's timeline, computed on the server (R-WIN-2)."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from arkvory_sched import SchedulerSettings
from arkvory_sched.api._windows_view import windows_document

BERLIN = ZoneInfo("Europe/Berlin")
NIGHTLY = {
    "bulk": {
        "windows": [
            {"weekdays": ["mon", "tue", "wed", "thu", "fri", "sat", "sun"],
             "start": "22:00", "end": "06:00", "zone": "Europe/Berlin"}
        ],
        "outsideShare": 0.25,
    }
}  # fmt: skip


def at(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=BERLIN).timestamp()


def utc(text: str) -> str:
    return (
        datetime.fromisoformat(text)
        .replace(tzinfo=BERLIN)
        .astimezone(ZoneInfo("UTC"))
        .strftime("%Y-%m-%dT%H:%M:%SZ")
    )


def test_a_night_window_on_the_spring_forward_day() -> None:
    settings = SchedulerSettings(class_windows=NIGHTLY)
    document: dict[str, Any] = windows_document(settings, at("2026-03-29T12:00"))
    assert document["zone"] == "Europe/Berlin"
    assert (document["since"], document["until"]) == (
        utc("2026-03-29T00:00"),
        utc("2026-03-31T00:00"),
    )
    assert [day["date"] for day in document["days"]] == ["2026-03-29", "2026-03-30"]
    bulk = document["classes"]["bulk"]
    assert bulk["open"] == [
        {"from": utc("2026-03-29T00:00"), "to": utc("2026-03-29T06:00")},
        {"from": utc("2026-03-29T22:00"), "to": utc("2026-03-30T06:00")},
        {"from": utc("2026-03-30T22:00"), "to": utc("2026-03-31T00:00")},
    ]
    assert (bulk["openNow"], bulk["outsideShare"]) == (False, 0.25)
    assert bulk["nextOpening"] == utc("2026-03-29T22:00")
    assert bulk["nextClosing"] is None
    # The day of the change has 23 hours; the marks are where the wall clock reads them.
    marks = document["marks"]
    assert [mark["label"] for mark in marks[:3]] == ["00:00", "03:00", "06:00"]
    assert marks[1]["at"] == "2026-03-29T01:00:00Z", "03:00 CEST, an hour after 00:00 CET"
    assert len(marks) == 16
    assert document["classes"]["interactive"] == {"windowed": False, "open": []}


def test_open_now_and_without_windows_the_timeline_is_utc() -> None:
    settings = SchedulerSettings(class_windows=NIGHTLY)
    inside: dict[str, Any] = windows_document(settings, at("2026-07-01T23:30"))
    assert inside["classes"]["bulk"]["openNow"] is True
    assert inside["classes"]["bulk"]["nextClosing"] == utc("2026-07-02T06:00")
    plain: dict[str, Any] = windows_document(SchedulerSettings(), at("2026-07-01T23:30"))
    assert plain["zone"] == "UTC"
    assert all(not entry["windowed"] for entry in plain["classes"].values())
