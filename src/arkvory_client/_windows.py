"""Client windows: ``not_before`` (do not ask before) and ``not_after`` (R-CLIENT-7).

A time is either an RFC 3339 timestamp or ``HH:MM`` local time, meaning its next
occurrence. Two ``HH:MM`` times form a daily window that may cross midnight
(``22:00``–``06:00``): ``not_after`` is its next occurrence and ``not_before`` the last
occurrence before that, so a call at 23:00 starts at once and a call at noon waits for
22:00. The windows live only in the client; the server needs nothing for them (R-WIN-1).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta, tzinfo

from ._retry_after import parse_rfc3339

__all__ = ["TimeSpec", "Window", "parse_time", "resolve_window", "utc_from_timestamp"]

TimeSpec = str | datetime
"""What a caller may pass: RFC 3339 or ``HH:MM`` text, or a datetime (naive = local)."""

_CLOCK_TIME = re.compile(r"([01]?[0-9]|2[0-3]):([0-5][0-9])")


@dataclass(frozen=True, slots=True)
class Window:
    """Resolved client window: aware datetimes, either end may be open (``None``)."""

    not_before: datetime | None = None
    not_after: datetime | None = None


def parse_time(value: TimeSpec, *, now: datetime, tz: tzinfo | None = None) -> datetime:
    """``value`` as an aware datetime.

    ``HH:MM`` is its next occurrence after ``now`` in ``tz`` (the system's local time
    zone when ``None``, daylight saving included). A naive datetime or an RFC 3339 text
    without an offset is taken as local time too. Raises ``ValueError`` for anything
    else, naming the accepted forms.
    """
    _require_aware(now)
    if isinstance(value, datetime):
        return _localize(value, tz) if value.tzinfo is None else value
    text = value.strip()
    match = _CLOCK_TIME.fullmatch(text)
    if match is not None:
        return _next_occurrence(time(int(match[1]), int(match[2])), now, tz)
    parsed = parse_rfc3339(text) if "T" in text.upper() or " " in text else None
    if parsed is None:
        raise ValueError(f"{value!r} is neither an RFC 3339 time nor HH:MM")
    has_offset = text[-1:] in ("z", "Z") or re.search(r"[+-]\d\d:?\d\d$", text) is not None
    return parsed if has_offset else _localize(parsed.replace(tzinfo=None), tz)


def resolve_window(
    not_before: TimeSpec | None,
    not_after: TimeSpec | None,
    *,
    now: datetime,
    tz: tzinfo | None = None,
) -> Window:
    """Both ends of a client window, with the daily-window rule for two ``HH:MM`` times.

    Raises ``ValueError`` when ``not_before`` is not earlier than ``not_after``.
    """
    after = parse_time(not_after, now=now, tz=tz) if not_after is not None else None
    before = parse_time(not_before, now=now, tz=tz) if not_before is not None else None
    daily = _is_clock(not_before) and _is_clock(not_after)
    if before is not None and after is not None and daily and before > after:
        # The window opened before now and is open now: its start was a day earlier.
        before = _localize(before.replace(tzinfo=None) - timedelta(days=1), tz)
    if before is not None and after is not None and before >= after:
        raise ValueError(f"not_before ({before.isoformat()}) must be before not_after")
    return Window(not_before=before, not_after=after)


def _is_clock(value: TimeSpec | None) -> bool:
    return isinstance(value, str) and _CLOCK_TIME.fullmatch(value.strip()) is not None


def _next_occurrence(at: time, now: datetime, tz: tzinfo | None) -> datetime:
    local_now = now.astimezone(tz) if tz is not None else now.astimezone()
    day = local_now.date()
    for offset in range(3):  # today, tomorrow; a third day only across a DST gap
        candidate = _localize(datetime.combine(day + timedelta(days=offset), at), tz)
        if candidate > now:
            return candidate
    raise AssertionError("unreachable: a clock time recurs within two days")


def _localize(naive: datetime, tz: tzinfo | None) -> datetime:
    if tz is not None:
        return naive.replace(tzinfo=tz)
    return naive.astimezone()  # interprets a naive datetime as system local time


def _require_aware(now: datetime) -> None:
    if now.tzinfo is None:
        raise ValueError("now must be an aware datetime")


def utc_from_timestamp(seconds: float) -> datetime:
    """Unix seconds as an aware UTC datetime (how the client turns clock readings into
    times it can compare with parsed windows)."""
    return datetime.fromtimestamp(seconds, tz=UTC)
