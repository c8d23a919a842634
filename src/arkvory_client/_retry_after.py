"""Reading the server's timing headers: ``Retry-After`` and ``Arkvory-Starts-At``.

Both parsers are total: any header value, however malformed, gives a value or ``None``
and never an exception, because a proxy that mangles a header must not turn "come back
later" into a crash. ``Retry-After`` is trusted only up to one hour: a larger value is a
proxy bug, so the client waits one hour and then asks again (R-CLIENT-4).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Final

__all__ = [
    "MAX_RETRY_AFTER",
    "StartsAt",
    "parse_queue_position",
    "parse_retry_after",
    "parse_rfc3339",
    "parse_starts_at",
]

MAX_RETRY_AFTER: Final = 3600.0
"""The longest wait one ``Retry-After`` can ask for, in seconds (R-CLIENT-4)."""

_DELTA = re.compile(r"[+-]?[0-9]+(?:\.[0-9]*)?")
_MAX_DIGITS: Final = 12  # more digits is far beyond the cap; int() of them could be slow
_MAX_HEADER: Final = 256


def parse_retry_after(value: str | None, now_wall: float) -> float | None:
    """Seconds to wait according to a ``Retry-After`` value, or ``None`` when unusable.

    Accepts delta-seconds (``"120"``, leniently also ``"1.5"``) and an HTTP-date
    (``"Wed, 21 Oct 2015 07:28:00 GMT"``, taken relative to ``now_wall``, the Unix time
    now). Negative values and dates in the past give ``0``; anything above
    :data:`MAX_RETRY_AFTER` gives exactly that. The result is always in
    ``[0, MAX_RETRY_AFTER]``.
    """
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    if _DELTA.fullmatch(text):
        return _delta_seconds(text)
    if len(text) > _MAX_HEADER:
        return None
    try:
        moment = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)  # "-0000": UTC of unknown origin
    try:
        seconds = moment.timestamp() - now_wall
    except (OverflowError, OSError, ValueError):
        return None
    return _clamp(seconds)


def _delta_seconds(text: str) -> float:
    if text.startswith("-"):
        return 0.0
    whole = text.lstrip("+").split(".", 1)[0].lstrip("0")
    if len(whole) > _MAX_DIGITS:
        return MAX_RETRY_AFTER
    return _clamp(float(text))


def _clamp(seconds: float) -> float:
    if math.isnan(seconds):
        return MAX_RETRY_AFTER
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)


@dataclass(frozen=True, slots=True)
class StartsAt:
    """The start the server estimates for a queued download (``Arkvory-Starts-At``).

    ``point`` is the best estimate; ``earliest`` and ``latest`` bound it (R-EST-2). A
    header without the interval gives ``earliest == latest == point``. ``guessed``: the
    server has neither a configured nor a measured link rate yet (``basis=guess``), so
    the point is a guess and only the interval says something (ADR 0042).
    """

    point: datetime
    earliest: datetime
    latest: datetime
    guessed: bool = False


def parse_rfc3339(value: str) -> datetime | None:
    """An RFC 3339 timestamp as an aware datetime (UTC if it names no offset), or ``None``."""
    text = value.strip()
    if not text or len(text) > 64:
        return None
    if text[-1:] in ("z", "Z"):
        text = text[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment


def parse_starts_at(value: str | None) -> StartsAt | None:
    """Parse ``<rfc3339>; earliest=<rfc3339>; latest=<rfc3339>[; basis=guess]``; ``None``
    when unusable.

    Unknown parameters are ignored so that the server may add some; a malformed
    ``earliest``/``latest`` falls back to the point.
    """
    if value is None or len(value) > _MAX_HEADER:
        return None
    first, *parameters = value.split(";")
    point = parse_rfc3339(first)
    if point is None:
        return None
    bounds: dict[str, datetime] = {}
    guessed = False
    for parameter in parameters:
        name, _, raw = parameter.partition("=")
        name, value = name.strip().lower(), raw.strip().strip('"')
        if name == "basis":
            guessed = value.lower() == "guess"
            continue
        moment = parse_rfc3339(value)
        if moment is not None:
            bounds[name] = moment
    earliest = min(bounds.get("earliest", point), point)
    latest = max(bounds.get("latest", point), point)
    return StartsAt(point=point, earliest=earliest, latest=latest, guessed=guessed)


def parse_queue_position(value: str | None) -> int | None:
    """``Arkvory-Queue-Position`` as a positive integer (1 is next), or ``None``."""
    if value is None:
        return None
    text = value.strip()
    if not text.isdecimal() or not text.isascii() or len(text) > 18:
        return None
    position = int(text)
    return position if position >= 1 else None
