"""Today's and tomorrow's class windows as instants, for a timeline (R-WIN-2, R-VIS-2).

An operator writes a window in the wall time of a zone (ADR 0021); a page that draws
it must know when that is, across daylight saving time, on the day it is looked at.
That arithmetic is the policy's (:func:`open_intervals`, :func:`wall_instant`) and is
done here, on the server, so the page only places given instants on a line and never
does time-zone math of its own (a browser's idea of ``Europe/Berlin`` may differ from
the server's ``tzdata``, and then the page would draw a window the queue does not
keep).

The timeline covers two calendar days in one zone: that of the first window of the
most urgent windowed class (operators usually write all windows in the zone of their
link), or UTC when no class has windows. Its marks are every three hours of wall
time in that zone, so on a DST day the marks are where the clocks on the wall are.
"""

from __future__ import annotations

from datetime import datetime, time, timedelta
from typing import Final
from zoneinfo import ZoneInfo

from .._classes import DownloadClass
from ..policy import is_open, next_closing, next_opening, open_intervals, wall_instant
from ..settings import SchedulerSettings
from ._state_view import rfc3339

__all__ = ["windows_document"]

_DAYS: Final = ("today", "tomorrow")
_MARK_HOURS: Final = (0, 3, 6, 9, 12, 15, 18, 21)
_DEFAULT_ZONE: Final = "UTC"


def timeline_zone(settings: SchedulerSettings) -> str:
    """The zone the timeline is drawn in (see the module docstring)."""
    for _cls, schedule in settings.class_windows:
        if schedule.windows:
            return schedule.windows[0].zone
    return _DEFAULT_ZONE


def windows_document(settings: SchedulerSettings, now: float) -> dict[str, object]:
    """Every class's open stretches between the start of today and the end of tomorrow.

    A class without windows is ``"windowed": false`` (always open, ``open`` empty); a
    windowed class lists its merged open intervals, whether it is open ``now``, when it
    next opens and closes, and its ``outsideShare``.
    """
    zone_name = timeline_zone(settings)
    zone = ZoneInfo(zone_name)
    today = datetime.fromtimestamp(now, zone).date()
    day_starts = [wall_instant(today + timedelta(days=n), time(0), zone) for n in range(3)]
    since, until = day_starts[0], day_starts[-1]
    marks: list[tuple[float, str]] = []
    for offset in range(2):
        day = today + timedelta(days=offset)
        for hour in _MARK_HOURS:
            at = wall_instant(day, time(hour), zone)
            if not marks or at > marks[-1][0]:  # a mark inside a DST gap is skipped
                marks.append((at, f"{hour:02d}:00"))
    classes: dict[str, object] = {}
    for cls in DownloadClass:
        schedule = settings.schedule_of(cls)
        if schedule is None or not schedule.windows:
            classes[cls.value] = {"windowed": False, "open": []}
            continue
        windows = schedule.windows
        opening = next_opening(windows, now)
        closing = next_closing(windows, now)
        classes[cls.value] = {
            "windowed": True,
            "outsideShare": schedule.outside_share,
            "openNow": is_open(windows, now),
            "nextOpening": None if opening is None else rfc3339(opening),
            "nextClosing": None if closing is None else rfc3339(closing),
            "open": [
                {"from": rfc3339(opens), "to": rfc3339(closes)}
                for opens, closes in open_intervals(windows, since, until)
            ],
        }
    return {
        "zone": zone_name,
        "since": rfc3339(since),
        "until": rfc3339(until),
        "days": [
            {
                "label": label,
                "date": (today + timedelta(days=n)).isoformat(),
                "from": rfc3339(start),
            }
            for n, (label, start) in enumerate(zip(_DAYS, day_starts, strict=False))
        ],
        "marks": [{"at": rfc3339(at), "label": label} for at, label in marks],
        "classes": classes,
    }
