"""Operator windows of a class (R-WIN-2): when, in wall time of a zone, a class is open.

A window says: on these weekdays, from ``start`` to ``end`` in the wall time of an IANA
zone. It belongs to the day it starts, so ``22:00``–``06:00`` on Friday runs into
Saturday morning. Wall times become instants by one rule, which settles both edges of
daylight saving time: a wall time is *the first instant whose wall clock reads it or
later*. In the spring-forward gap that is the end of the gap (a window at 02:30 on that
day opens at 03:00); in the repeated hour of the fall-back it is the first occurrence,
so nothing opens or closes twice. Windows that overlap are merged: the class is open
while any of its windows is.

Pure functions of instants (seconds since the epoch, wall time): the stores convert
their queue time to wall time before they ask (R-RES-5). The only thing read is the
time-zone database (ADR 0021).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .._classes import DownloadClass
from .._exceptions import SettingsError

__all__ = [
    "WEEKDAYS",
    "ClassSchedule",
    "ClassSchedules",
    "ClassWindow",
    "is_open",
    "next_closing",
    "next_opening",
    "open_intervals",
    "parse_windows",
]

WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_WEEK_SECONDS = 7 * 86_400.0
# A window's occurrences are looked for this many days around the instants asked about:
# one day back for a window that started yesterday, and a week and a day ahead for the
# next opening of a window that opens once a week.
_DAYS_BACK = 1
_DAYS_AHEAD = 8


@dataclass(frozen=True, slots=True)
class ClassWindow:
    """One window: weekdays (0 is Monday), start and end as wall time, an IANA zone."""

    weekdays: frozenset[int]
    start: time
    end: time
    zone: str

    def occurrences(self, since: float, until: float) -> list[tuple[float, float]]:
        """The instants [opens, closes) of each occurrence overlapping [since, until)."""
        zone = ZoneInfo(self.zone)
        first = _local_date(since, zone) - timedelta(days=_DAYS_BACK)
        last = _local_date(until, zone)
        found = []
        day = first
        while day <= last:
            if day.weekday() in self.weekdays:
                opens = wall_instant(day, self.start, zone)
                closes_on = day if self.end > self.start else day + timedelta(days=1)
                closes = wall_instant(closes_on, self.end, zone)
                if opens < closes and closes > since and opens < until:
                    found.append((opens, closes))
            day += timedelta(days=1)
        return found


@dataclass(frozen=True, slots=True)
class ClassSchedule:
    """When one class runs: its windows, and the share of slots it may hold outside them.

    ``outside_share`` is a fraction of ``sessions``: outside its windows the class
    holds at most ``floor(outside_share × sessions)`` slots (0: none at all).
    """

    windows: tuple[ClassWindow, ...]
    outside_share: float = 0.0


#: Schedules by class, most urgent first; only classes an operator gave windows.
ClassSchedules = tuple[tuple[DownloadClass, ClassSchedule], ...]


def wall_instant(day: date, wall: time, zone: ZoneInfo) -> float:
    """The first instant at which the wall clock of ``zone`` reads ``day wall`` or later."""
    naive = datetime.combine(day, wall)
    earlier = naive.replace(tzinfo=zone, fold=0)
    if earlier.astimezone(UTC).astimezone(zone).replace(tzinfo=None) == naive:
        return earlier.timestamp()  # it exists; in a repeated hour, its first occurrence
    # In a gap: the wall clock jumps over it between these two readings of it; the
    # transition is at a whole second, found by bisection.
    low = int(naive.replace(tzinfo=zone, fold=1).timestamp())
    high = int(earlier.timestamp()) + 1
    while low < high:
        middle = (low + high) // 2
        if datetime.fromtimestamp(middle, zone).replace(tzinfo=None) >= naive:
            high = middle
        else:
            low = middle + 1
    return float(low)


def open_intervals(
    windows: Iterable[ClassWindow], since: float, until: float
) -> list[tuple[float, float]]:
    """The instants the class is open within [since, until): windows merged, in order."""
    spans = sorted(span for window in windows for span in window.occurrences(since, until))
    merged: list[tuple[float, float]] = []
    for opens, closes in spans:
        if merged and opens <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], closes))
        else:
            merged.append((opens, closes))
    return [(max(opens, since), min(closes, until)) for opens, closes in merged]


def is_open(windows: Sequence[ClassWindow], at: float) -> bool:
    """A class without windows is always open; one with windows, only inside one."""
    if not windows:
        return True
    return any(
        opens <= at < closes
        for window in windows
        for opens, closes in window.occurrences(at, at + 1.0)
    )


def next_opening(windows: Sequence[ClassWindow], at: float) -> float | None:
    """``at`` itself when open, else when the next window opens (None: no window ever)."""
    if not windows:
        return at
    spans = open_intervals(windows, at, at + _WEEK_SECONDS + 86_400.0)
    return spans[0][0] if spans else None


def next_closing(windows: Sequence[ClassWindow], at: float) -> float | None:
    """When the open stretch that holds ``at`` ends (None: closed now, or never closes)."""
    if not windows:
        return None
    spans = open_intervals(windows, at, at + _DAYS_AHEAD * 86_400.0)
    if not spans or spans[0][0] > at:
        return None
    closes = spans[0][1]
    return None if closes >= at + _DAYS_AHEAD * 86_400.0 else closes


def parse_windows(raw: object, field: str = "windows") -> tuple[ClassWindow, ...]:
    """Windows from JSON-shaped input; a bad value is refused naming its field
    (``windows/0/zone``), as the settings API reports it."""
    if not isinstance(raw, list):
        raise SettingsError(field, "must be a list of windows")
    return tuple(_parse_window(item, f"{field}/{index}") for index, item in enumerate(raw))


def _parse_window(raw: object, field: str) -> ClassWindow:
    if not isinstance(raw, Mapping):
        raise SettingsError(field, "must be an object with weekdays, start, end and zone")
    unknown = set(raw) - {"weekdays", "start", "end", "zone"}
    if unknown:
        raise SettingsError(f"{field}/{sorted(unknown)[0]}", "is not a field of a window")
    weekdays = raw.get("weekdays")
    if not isinstance(weekdays, list) or not weekdays:
        raise SettingsError(f"{field}/weekdays", f"must be a non-empty list of {WEEKDAYS}")
    days = set()
    for index, name in enumerate(weekdays):
        if name not in WEEKDAYS:
            raise SettingsError(f"{field}/weekdays/{index}", f"must be one of {WEEKDAYS}")
        days.add(WEEKDAYS.index(name))
    start = _wall_time(raw.get("start"), f"{field}/start")
    end = _wall_time(raw.get("end"), f"{field}/end")
    if start == end:
        raise SettingsError(f"{field}/end", "must differ from start (a window of no length)")
    zone = raw.get("zone")
    if not isinstance(zone, str) or not zone:
        raise SettingsError(f"{field}/zone", "must be an IANA time zone such as Europe/Berlin")
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        raise SettingsError(f"{field}/zone", f"unknown time zone {zone!r}") from None
    return ClassWindow(frozenset(days), start, end, zone)


def _wall_time(raw: object, field: str) -> time:
    if not isinstance(raw, str) or len(raw) != 5 or raw[2] != ":":
        raise SettingsError(field, "must be a wall time HH:MM")
    try:
        return time(int(raw[:2]), int(raw[3:]))
    except ValueError:
        raise SettingsError(field, "must be a wall time HH:MM from 00:00 to 23:59") from None


def _local_date(instant: float, zone: ZoneInfo) -> date:
    return datetime.fromtimestamp(instant, zone).date()
