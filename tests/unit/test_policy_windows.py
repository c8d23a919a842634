"""Class windows (R-WIN-2) in wall time of a zone, across daylight saving time.

Two zones with different transition dates (Europe/Berlin, America/New_York), each edge
the issue names: the spring-forward gap, the fall-back repeated hour, a window crossing
midnight on a DST day, an unknown zone, overlapping windows (merged).
"""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from arkvory_sched import SettingsError, policy
from arkvory_sched.policy import ClassWindow

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")
HOUR = 3600.0


def at(zone: ZoneInfo, text: str, *, fold: int = 0) -> float:
    """The instant of a wall time written ``2026-03-29 03:00`` in ``zone``."""
    return datetime.fromisoformat(text).replace(tzinfo=zone, fold=fold).timestamp()


def windows(*items: tuple[list[str], str, str, str]) -> tuple[ClassWindow, ...]:
    return policy.parse_windows(
        [
            {"weekdays": days, "start": start, "end": end, "zone": zone}
            for days, start, end, zone in items
        ]
    )


def test_bulk_only_at_night_belongs_to_the_day_it_starts() -> None:
    night = windows((["fri"], "22:00", "06:00", "Europe/Berlin"))
    assert not policy.is_open(night, at(BERLIN, "2026-06-05 21:59"))  # Friday
    assert policy.is_open(night, at(BERLIN, "2026-06-05 22:00"))
    assert policy.is_open(night, at(BERLIN, "2026-06-06 05:59"))  # Saturday morning
    assert not policy.is_open(night, at(BERLIN, "2026-06-06 06:00"))
    assert not policy.is_open(night, at(BERLIN, "2026-06-06 23:00"))  # Saturday night: not a Friday
    assert policy.next_opening(night, at(BERLIN, "2026-06-05 18:00")) == at(
        BERLIN, "2026-06-05 22:00"
    )
    assert policy.next_closing(night, at(BERLIN, "2026-06-05 23:00")) == at(
        BERLIN, "2026-06-06 06:00"
    )
    # From Saturday noon the next opening is a week on.
    assert policy.next_opening(night, at(BERLIN, "2026-06-06 12:00")) == at(
        BERLIN, "2026-06-12 22:00"
    )


def test_a_window_starting_in_the_spring_forward_gap_opens_at_its_end() -> None:
    # Europe/Berlin, Sunday 2026-03-29: 02:00 CET jumps to 03:00 CEST.
    gap = windows((["sun"], "02:30", "04:00", "Europe/Berlin"))
    [(opens, closes)] = policy.open_intervals(
        gap, at(BERLIN, "2026-03-29 00:00"), at(BERLIN, "2026-03-30 00:00")
    )
    assert opens == at(BERLIN, "2026-03-29 03:00")
    assert closes - opens == 1 * HOUR
    # New York, Sunday 2026-03-08: 02:00 EST jumps to 03:00 EDT. A window that lies
    # wholly in the gap has no instant that day: it opens next on the next Sunday.
    inside = windows((["sun"], "02:00", "02:59", "America/New_York"))
    day = (at(NEW_YORK, "2026-03-08 00:00"), at(NEW_YORK, "2026-03-09 00:00"))
    assert policy.open_intervals(inside, *day) == []
    assert policy.next_opening(inside, day[0]) == at(NEW_YORK, "2026-03-15 02:00")


def test_nothing_opens_or_closes_twice_in_the_repeated_hour() -> None:
    # Europe/Berlin, Sunday 2026-10-25: 03:00 CEST goes back to 02:00 CET.
    repeated = windows((["sun"], "02:15", "02:45", "Europe/Berlin"))
    spans = policy.open_intervals(
        repeated, at(BERLIN, "2026-10-25 00:00"), at(BERLIN, "2026-10-26 00:00")
    )
    assert spans == [(at(BERLIN, "2026-10-25 02:15"), at(BERLIN, "2026-10-25 02:45"))]
    assert not policy.is_open(repeated, at(BERLIN, "2026-10-25 02:30", fold=1))  # the second 02:30
    # A window ending in the repeated hour ends at its first occurrence.
    evening = windows((["sat"], "22:00", "02:30", "Europe/Berlin"))
    [(opens, closes)] = policy.open_intervals(
        evening, at(BERLIN, "2026-10-24 12:00"), at(BERLIN, "2026-10-25 12:00")
    )
    assert closes - opens == 4.5 * HOUR


def test_a_window_crossing_midnight_on_a_dst_night_is_as_long_as_the_clock_says() -> None:
    night = windows((["sat"], "22:00", "06:00", "America/New_York"))
    # Into the spring-forward Sunday 2026-03-08: 7 hours, not 8.
    [(opens, closes)] = policy.open_intervals(
        night, at(NEW_YORK, "2026-03-07 12:00"), at(NEW_YORK, "2026-03-08 12:00")
    )
    assert (opens, closes) == (at(NEW_YORK, "2026-03-07 22:00"), at(NEW_YORK, "2026-03-08 06:00"))
    assert closes - opens == 7 * HOUR
    # Into the fall-back Sunday 2026-11-01: 9 hours.
    [(opens, closes)] = policy.open_intervals(
        night, at(NEW_YORK, "2026-10-31 12:00"), at(NEW_YORK, "2026-11-01 12:00")
    )
    assert closes - opens == 9 * HOUR


def test_overlapping_windows_are_merged() -> None:
    overlapping = windows(
        (["mon"], "10:00", "14:00", "Europe/Berlin"),
        (["mon"], "12:00", "16:00", "Europe/Berlin"),
        (["mon"], "15:00", "17:00", "America/New_York"),  # 21:00-23:00 in Berlin: apart
    )
    spans = policy.open_intervals(
        overlapping, at(BERLIN, "2026-06-01 00:00"), at(BERLIN, "2026-06-02 00:00")
    )
    assert spans == [
        (at(BERLIN, "2026-06-01 10:00"), at(BERLIN, "2026-06-01 16:00")),
        (at(BERLIN, "2026-06-01 21:00"), at(BERLIN, "2026-06-01 23:00")),
    ]
    assert policy.next_closing(overlapping, at(BERLIN, "2026-06-01 11:00")) == at(
        BERLIN, "2026-06-01 16:00"
    )


def test_a_class_without_windows_is_always_open() -> None:
    assert policy.is_open((), 0.0)
    assert policy.next_opening((), 123.0) == 123.0
    assert policy.next_closing((), 123.0) is None


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (
            [{"weekdays": ["mon"], "start": "22:00", "end": "06:00", "zone": "Mars/Olympus"}],
            "windows/0/zone",
        ),
        (
            [{"weekdays": ["mon"], "start": "22:00", "end": "06:00", "zone": "../etc/passwd"}],
            "windows/0/zone",
        ),
        (
            [{"weekdays": ["monday"], "start": "22:00", "end": "06:00", "zone": "UTC"}],
            "windows/0/weekdays/0",
        ),
        ([{"weekdays": [], "start": "22:00", "end": "06:00", "zone": "UTC"}], "windows/0/weekdays"),
        (
            [{"weekdays": ["mon"], "start": "24:00", "end": "06:00", "zone": "UTC"}],
            "windows/0/start",
        ),
        ([{"weekdays": ["mon"], "start": "22:00", "end": "22:00", "zone": "UTC"}], "windows/0/end"),
        ([{"weekdays": ["mon"], "start": "22:00", "end": "6", "zone": "UTC"}], "windows/0/end"),
        (
            [{"weekdays": ["mon"], "start": "22:00", "end": "06:00", "zone": "UTC", "x": 1}],
            "windows/0/x",
        ),
        ({"weekdays": ["mon"]}, "windows"),
    ],
)
def test_a_bad_window_is_refused_naming_its_field(raw: object, field: str) -> None:
    with pytest.raises(SettingsError) as refused:
        policy.parse_windows(raw)
    assert refused.value.field == field
