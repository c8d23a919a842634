"""``Retry-After`` and ``Arkvory-Starts-At`` parsing (R-CLIENT-4, R-CLIENT-9).

Both parsers are total: whatever a proxy does to a header, the client gets a number in
``[0, 3600]`` or ``None`` — never an exception, never a wait of more than one hour.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arkvory_client import (
    MAX_RETRY_AFTER,
    StartsAt,
    parse_queue_position,
    parse_retry_after,
    parse_starts_at,
)

NOW = 1_780_000_000.0


def http_date(seconds_from_now: float) -> str:
    return format_datetime(datetime.fromtimestamp(NOW + seconds_from_now, tz=UTC), usegmt=True)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("120", 120.0),
        (" 7 ", 7.0),
        ("0", 0.0),
        ("1.5", 1.5),
        ("+30", 30.0),
        ("-5", 0.0),
        ("3600", 3600.0),
        ("3601", MAX_RETRY_AFTER),
        (str(10**10), MAX_RETRY_AFTER),
        ("9" * 5000, MAX_RETRY_AFTER),  # more digits than int() accepts by default
        ("9" * 200, MAX_RETRY_AFTER),
        ("000000000000000000000042", 42.0),
        (None, None),
        ("", None),
        ("soon", None),
        ("12 seconds", None),
        ("nan", None),
        ("inf", None),
        ("1e9", None),
        ("Wed, 32 Oct 2015 07:28:00 GMT", None),
    ],
)
def test_delta_seconds_and_garbage(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value, NOW) == expected


@pytest.mark.parametrize(
    ("offset", "expected"),
    [(90, 90.0), (0, 0.0), (-3600, 0.0), (7200, MAX_RETRY_AFTER), (10**9, MAX_RETRY_AFTER)],
)
def test_http_date_is_relative_to_now(offset: int, expected: float) -> None:
    assert parse_retry_after(http_date(offset), NOW) == pytest.approx(expected)


def test_http_date_without_zone_is_utc() -> None:
    moment = datetime.fromtimestamp(NOW + 60, tz=UTC)
    value = moment.strftime("%a, %d %b %Y %H:%M:%S -0000")
    assert parse_retry_after(value, NOW) == pytest.approx(60.0)


@given(st.text(max_size=300), st.floats(min_value=0, max_value=4e9))
def test_never_raises_and_stays_within_one_hour(value: str, now: float) -> None:
    seconds = parse_retry_after(value, now)
    assert seconds is None or 0.0 <= seconds <= MAX_RETRY_AFTER


@given(st.integers(min_value=-(10**30), max_value=10**30))
def test_any_integer_is_clamped(number: int) -> None:
    seconds = parse_retry_after(str(number), NOW)
    assert seconds == min(max(number, 0), MAX_RETRY_AFTER)


@given(st.datetimes(timezones=st.just(UTC), min_value=datetime(1900, 1, 1)))
def test_any_http_date_is_clamped(moment: datetime) -> None:
    seconds = parse_retry_after(format_datetime(moment, usegmt=True), NOW)
    assert seconds is not None
    expected = min(max(moment.timestamp() - NOW, 0.0), MAX_RETRY_AFTER)
    assert seconds == pytest.approx(expected, abs=1.0)


def test_starts_at_with_interval() -> None:
    parsed = parse_starts_at(
        "2026-05-28T21:00:00Z; earliest=2026-05-28T20:40:00Z; latest=2026-05-28T21:30:00Z"
    )
    point = datetime(2026, 5, 28, 21, tzinfo=UTC)
    assert parsed == StartsAt(
        point=point, earliest=point - timedelta(minutes=20), latest=point + timedelta(minutes=30)
    )


def test_starts_at_on_a_guessed_rate() -> None:
    parsed = parse_starts_at(
        "2026-05-28T21:00:00Z; earliest=2026-05-28T20:40:00Z; latest=2026-05-28T21:30:00Z"
        "; basis=guess"
    )
    assert parsed is not None
    assert parsed.guessed
    assert parsed.earliest == datetime(2026, 5, 28, 20, 40, tzinfo=UTC)
    measured = parse_starts_at("2026-05-28T21:00:00Z; basis=measured")
    assert measured is not None
    assert not measured.guessed


def test_starts_at_without_interval_and_with_unknown_parameters() -> None:
    parsed = parse_starts_at("2026-05-28T21:00:00+02:00; confidence=0.8")
    assert parsed is not None
    assert parsed.point == parsed.earliest == parsed.latest
    assert parsed.point == datetime(2026, 5, 28, 19, tzinfo=UTC)


def test_starts_at_bounds_never_exclude_the_point() -> None:
    parsed = parse_starts_at(
        "2026-05-28T21:00:00Z; earliest=2026-05-28T22:00:00Z; latest=2026-05-28T20:00:00Z"
    )
    assert parsed is not None
    assert parsed.earliest <= parsed.point <= parsed.latest


@pytest.mark.parametrize("value", [None, "", "tomorrow", "2026-13-01T00:00:00Z; earliest=x"])
def test_starts_at_garbage_is_none(value: str | None) -> None:
    assert parse_starts_at(value) is None


def test_starts_at_with_garbage_bounds_keeps_the_point() -> None:
    parsed = parse_starts_at("2026-05-28T21:00:00Z; earliest=yesterday; latest")
    assert parsed is not None
    assert parsed.earliest == parsed.point == parsed.latest


@given(st.text(max_size=300))
def test_starts_at_never_raises(value: str) -> None:
    parsed = parse_starts_at(value)
    assert parsed is None or parsed.earliest <= parsed.point <= parsed.latest


@pytest.mark.parametrize(
    ("value", "expected"),
    [("1", 1), (" 312 ", 312), ("0", None), ("-1", None), ("x", None), ("١٢", None), (None, None)],
)
def test_queue_position(value: str | None, expected: int | None) -> None:
    assert parse_queue_position(value) == expected
