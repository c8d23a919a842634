"""Client windows (R-CLIENT-7): RFC 3339 or ``HH:MM`` (next occurrence, local time), and
two ``HH:MM`` times forming a daily window that may cross midnight."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pytest

from arkvory_client import Window, parse_time, resolve_window

TZ = timezone(timedelta(hours=2))


def local(day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 5, day, hour, minute, tzinfo=TZ)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-05-28T21:00:00Z", datetime(2026, 5, 28, 21, tzinfo=UTC)),
        ("2026-05-28t21:00:00z", datetime(2026, 5, 28, 21, tzinfo=UTC)),
        ("2026-05-28T23:00:00+02:00", datetime(2026, 5, 28, 21, tzinfo=UTC)),
        ("2026-05-28 23:00:00+02:00", datetime(2026, 5, 28, 21, tzinfo=UTC)),
        ("2026-05-28T23:00:00", local(28, 23)),  # no offset: local time
    ],
)
def test_rfc3339(text: str, expected: datetime) -> None:
    assert parse_time(text, now=local(28, 12), tz=TZ) == expected


@pytest.mark.parametrize(
    ("text", "now", "expected"),
    [
        ("22:00", local(28, 12), local(28, 22)),
        ("22:00", local(28, 23), local(29, 22)),
        ("22:00", local(28, 22), local(29, 22)),  # "next": not the current instant
        ("7:05", local(28, 7, 4), local(28, 7, 5)),
        ("00:00", local(31, 23, 59), datetime(2026, 6, 1, tzinfo=TZ)),
    ],
)
def test_clock_time_is_its_next_occurrence(text: str, now: datetime, expected: datetime) -> None:
    assert parse_time(text, now=now, tz=TZ) == expected


def test_a_naive_datetime_is_local_and_an_aware_one_is_kept() -> None:
    now = local(28, 12)
    assert parse_time(datetime(2026, 5, 28, 23), now=now, tz=TZ) == local(28, 23)
    aware = datetime(2026, 5, 28, 23, tzinfo=UTC)
    assert parse_time(aware, now=now, tz=TZ) is aware


@pytest.mark.parametrize("text", ["", "tomorrow", "24:00", "12:60", "2026-05-28", "12:00:00"])
def test_other_forms_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="RFC 3339"):
        parse_time(text, now=local(28, 12), tz=TZ)


def test_now_must_be_aware() -> None:
    with pytest.raises(ValueError, match="aware"):
        parse_time("12:00", now=datetime(2026, 5, 28, 12))


@pytest.mark.parametrize(
    ("now", "not_before", "not_after"),
    [
        (local(28, 23), local(28, 22), local(29, 6)),  # inside the night window: go now
        (local(29, 3), local(28, 22), local(29, 6)),
        (local(28, 12), local(28, 22), local(29, 6)),  # before it: wait for 22:00
        (local(29, 7), local(29, 22), local(30, 6)),  # just after it: the next night
    ],
)
def test_a_night_window_crosses_midnight(
    now: datetime, not_before: datetime, not_after: datetime
) -> None:
    window = resolve_window("22:00", "06:00", now=now, tz=TZ)
    assert window == Window(not_before=not_before, not_after=not_after)


@pytest.mark.parametrize(
    ("now", "not_before", "not_after"),
    [
        (local(28, 12), local(28, 9), local(28, 17)),  # open now
        (local(28, 18), local(29, 9), local(29, 17)),
        (local(28, 8), local(28, 9), local(28, 17)),
    ],
)
def test_a_day_window(now: datetime, not_before: datetime, not_after: datetime) -> None:
    assert resolve_window("09:00", "17:00", now=now, tz=TZ) == Window(not_before, not_after)


def test_open_ends() -> None:
    now = local(28, 12)
    assert resolve_window(None, None, now=now, tz=TZ) == Window()
    assert resolve_window("13:00", None, now=now, tz=TZ) == Window(not_before=local(28, 13))
    assert resolve_window(None, "11:00", now=now, tz=TZ) == Window(not_after=local(29, 11))


def test_an_empty_window_is_refused() -> None:
    with pytest.raises(ValueError, match="before not_after"):
        resolve_window("2026-05-28T20:00:00Z", "2026-05-28T19:00:00Z", now=local(28, 12), tz=TZ)


def test_clock_times_follow_daylight_saving() -> None:
    try:
        berlin = ZoneInfo("Europe/Berlin")
    except ZoneInfoNotFoundError:
        pytest.skip("no time zone database")
    before_switch = datetime(2026, 3, 28, 12, tzinfo=berlin)  # CET; CEST from 29 March 02:00
    moment = parse_time("01:30", now=before_switch, tz=berlin)
    assert moment.utcoffset() == timedelta(hours=1)
    window = resolve_window("22:00", "06:00", now=before_switch, tz=berlin)
    assert window.not_before is not None and window.not_after is not None
    # Seven real hours, one less than the clock says (same-zone subtraction is naive).
    assert window.not_after.timestamp() - window.not_before.timestamp() == 7 * 3600


def test_system_local_time_is_the_default() -> None:
    now = datetime.now(UTC)
    moment = parse_time("12:00", now=now)
    assert moment.tzinfo is not None
    assert now < moment <= now + timedelta(days=1, hours=2)
