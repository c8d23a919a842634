"""How ``arkvoryctl`` shows a download: the wording, and the plain, JSON and quiet displays.

The wording lives in small pure functions (an ordinal, a human duration, the queue line)
that take the current time as an argument, so the exact text a user reads is tested
without a clock or a terminal. A display turns the SDK's events into output:

* :class:`PlainDisplay` writes a new line only when there is something new to say (the
  queue line when it changes, progress at most every :data:`PLAIN_PROGRESS_INTERVAL`
  seconds and at 100 %), because stdout is a log file or a pipe, not a screen;
* :class:`JsonDisplay` writes one JSON object per event per line, for scripts;
* :class:`QuietDisplay` writes nothing but the final error.

The live terminal display (rich) is in :mod:`._render_tty`. Every display writes
errors the same way through :meth:`Display.failed`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Final, Protocol, TextIO

from ._clock import Clock
from ._events import Completed, DownloadState, Event, Progress, Queued, Retrying, Started

__all__ = [
    "PLAIN_PROGRESS_INTERVAL",
    "PROG",
    "Display",
    "JsonDisplay",
    "PlainDisplay",
    "QuietDisplay",
    "clock_time",
    "completed_line",
    "encodable",
    "eta_seconds",
    "human_duration",
    "json_time",
    "ordinal",
    "progress_line",
    "queue_line",
    "rate_text",
    "retrying_line",
    "size_text",
    "started_line",
    "waiting_line",
]

PROG: Final = "arkvoryctl"
PLAIN_PROGRESS_INTERVAL: Final = 5.0
"""Seconds between two progress lines when stdout is not a terminal."""

_MINUTE: Final = 60
_HOUR: Final = 3600
_DAY: Final = 86_400
_WEEK_DAYS: Final = 6
_UNITS: Final = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
_KIB: Final = 1024.0
_REASONS: Final = {
    "connection_error": "connection lost",
    "timeout": "no answer in time",
    "protocol_error": "broken response",
    "truncated_body": "response cut short",
}


# ---------------------------------------------------------------------- wording
def ordinal(number: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``4th`` … ``11th``, ``12th``, ``13th`` … ``21st``."""
    if 11 <= number % 100 <= 13:
        suffix = "th"
    else:
        suffix = {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return f"{number}{suffix}"


def human_duration(seconds: float) -> str:
    """A wait as people say it: ``30 s``, ``47 min``, ``2 h 5 min``, ``1 d 3 h``.

    Seconds below a minute, whole minutes below an hour, hours and minutes below a day,
    then days and hours: the precision a person needs to plan around a start.
    """
    seconds = max(0.0, seconds)
    whole = math.floor(seconds + 0.5)
    if whole < _MINUTE:
        return f"{whole} s"
    minutes = math.floor(seconds / _MINUTE + 0.5)
    if minutes < _MINUTE:
        return f"{minutes} min"
    if minutes < _DAY // _MINUTE:
        hours, rest = divmod(minutes, _MINUTE)
        return f"{hours} h" if rest == 0 else f"{hours} h {rest} min"
    hours_total = math.floor(seconds / _HOUR + 0.5)
    days, hours = divmod(hours_total, 24)
    return f"{days} d" if hours == 0 else f"{days} d {hours} h"


def clock_time(at: datetime, *, now: datetime, tz: tzinfo | None = None) -> str:
    """``at`` as local wall time: ``14:05`` today, ``Thu 14:05`` within a week, else the
    date too (``2026-06-02 14:05``), so a start days away is not read as today."""
    local = at.astimezone(tz)
    today = now.astimezone(tz).date()
    if local.date() == today:
        return local.strftime("%H:%M")
    if today < local.date() <= today + timedelta(days=_WEEK_DAYS):
        return local.strftime("%a %H:%M")
    return local.strftime("%Y-%m-%d %H:%M")


def queue_line(
    event: Queued, *, now: datetime, tz: tzinfo | None = None, retry_in: float | None = None
) -> str:
    """What a waiting download shows (R-CLI-1): ``queued, 312th, start ≈ 14:05 (in 47 min)``.

    Without a position: ``queued, start ≈ …``; a busy or rate-limited answer without
    queue information: ``server busy, retrying in 12 s``. ``retry_in`` overrides the
    server's ``Retry-After`` (a live display counts it down).
    """
    retry = event.retry_after if retry_in is None else retry_in
    parts = ["queued"]
    if event.position is not None:
        parts.append(ordinal(event.position))
    if event.starts_at is not None:
        left = (event.starts_at - now).total_seconds()
        when = "now" if left < 1 else f"in {human_duration(left)}"
        if event.guessed:  # nothing measured yet: say so rather than promise (ADR 0042)
            when += ", a first guess"
        parts.append(f"start ≈ {clock_time(event.starts_at, now=now, tz=tz)} ({when})")
    elif event.position is None:
        if event.reason != "download_queued":
            return f"server busy, retrying in {human_duration(retry)}"
        parts.append(f"asking again in {human_duration(retry)}")
    return ", ".join(parts)


def waiting_line(until: datetime, *, now: datetime, tz: tzinfo | None = None) -> str:
    """``--not-before``: ``not asking before 22:00 (in 3 h 12 min)``."""
    left = (until - now).total_seconds()
    return f"not asking before {clock_time(until, now=now, tz=tz)} (in {human_duration(left)})"


def size_text(size: float) -> str:
    """Bytes in binary units: ``512 B``, ``1.5 KiB``, ``64.0 MiB``."""
    value = float(size)
    for unit in _UNITS:
        if abs(value) < _KIB or unit == _UNITS[-1]:
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= _KIB
    raise AssertionError("unreachable")


def rate_text(rate: float) -> str:
    return f"{size_text(rate)}/s"


def eta_seconds(done: int, size: int | None, rate: float) -> float | None:
    """Seconds left at ``rate``, or ``None`` when it cannot be told."""
    if size is None or rate <= 0:
        return None
    return max(0, size - done) / rate


def progress_line(done: int, size: int | None, rate: float) -> str:
    """``12.0 MiB of 64.0 MiB (18 %), 19.1 MiB/s, 3 s left``."""
    if size is None:
        return f"{size_text(done)}, {rate_text(rate)}"
    percent = math.floor(100 * done / size) if size > 0 else 100
    text = f"{size_text(done)} of {size_text(size)} ({percent} %), {rate_text(rate)}"
    eta = eta_seconds(done, size, rate)
    if done < size and eta is not None:
        text += f", {human_duration(eta)} left"
    return text


def started_line(event: Started, name: str) -> str:
    total = f"{size_text(event.size)}" if event.size is not None else "size unknown"
    if event.offset > 0:
        return f"resuming {name} at {size_text(event.offset)} of {total}"
    return f"downloading {name} ({total})"


def retrying_line(event: Retrying) -> str:
    reason = _REASONS.get(event.reason)
    if reason is None and event.reason.startswith("status_"):
        reason = f"the server answered {event.reason.removeprefix('status_')}"
    return (
        f"{reason or event.reason.replace('_', ' ')}, retrying in "
        f"{human_duration(event.delay)} (attempt {event.attempt})"
    )


def completed_line(event: Completed) -> str:
    return f"saved {event.path} ({size_text(event.size)})"


def json_time(at: datetime | None) -> str | None:
    """RFC 3339 in UTC with ``Z``, or ``None``."""
    if at is None:
        return None
    return at.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


# ---------------------------------------------------------------------- displays
class Display(Protocol):
    """Where a download's story goes; the CLI calls these in order, then :meth:`close`."""

    def resumed(self, state: DownloadState, *, upgraded: bool) -> None:
        """A checkpoint was found: the download continues (``upgraded``: it had no id)."""
        ...

    def waiting(self, until: datetime) -> None:
        """``--not-before`` is in the future: nothing is asked of the server until then."""
        ...

    def show(self, event: Event) -> None:
        """An event of the SDK."""
        ...

    def restarted(self, message: str) -> None:
        """The object changed on the server; the download starts again from zero."""
        ...

    def failed(self, code: str, message: str, details: Mapping[str, object]) -> None:
        """The download ended without the file: ``code`` is a machine word."""
        ...

    def close(self) -> None:
        """Stop anything live; called once, also after an error."""
        ...


def encodable(text: str, stream: TextIO) -> str:
    """``text`` as ``stream`` can write it: a log in a legacy encoding gets ``~`` for
    ``≈`` and ``?`` for what else it lacks, instead of a crash mid-download."""
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        text.encode(encoding)
    except UnicodeEncodeError:
        text = text.replace("≈", "~").encode(encoding, "replace").decode(encoding)
    except LookupError:
        pass
    return text


def _write_error(err: TextIO, message: str) -> None:
    err.write(encodable(f"{PROG}: {message}", err) + "\n")
    err.flush()


class QuietDisplay:
    """``--quiet``: nothing but errors, on stderr."""

    def __init__(self, err: TextIO) -> None:
        self._err = err

    def resumed(self, state: DownloadState, *, upgraded: bool) -> None:
        pass

    def waiting(self, until: datetime) -> None:
        pass

    def show(self, event: Event) -> None:
        pass

    def restarted(self, message: str) -> None:
        pass

    def failed(self, code: str, message: str, details: Mapping[str, object]) -> None:
        _write_error(self._err, message)

    def close(self) -> None:
        pass


class PlainDisplay:
    """Plain lines for a log or a pipe: each line says something new.

    The queue line is written when its text changes; progress at most every
    :data:`PLAIN_PROGRESS_INTERVAL` seconds of ``clock`` and once at 100 %.
    """

    def __init__(
        self,
        out: TextIO,
        err: TextIO,
        *,
        name: str,
        checkpoint: str,
        clock: Clock,
        tz: tzinfo | None = None,
    ) -> None:
        self._out = out
        self._err = err
        self._name = name
        self._checkpoint = checkpoint
        self._clock = clock
        self._tz = tz
        self._last_queue_line: str | None = None
        self._last_progress: float | None = None
        self._finished_shown = False

    def _line(self, text: str) -> None:
        self._out.write(encodable(text, self._out) + "\n")
        self._out.flush()

    def waiting(self, until: datetime) -> None:
        now = datetime.fromtimestamp(self._clock.wall(), tz=UTC)
        self._line(waiting_line(until, now=now, tz=self._tz))

    def resumed(self, state: DownloadState, *, upgraded: bool) -> None:
        if upgraded:
            self._line(f"{self._checkpoint} has no download id; continuing as {state.download_id}")
        saved = f"{size_text(state.done)} saved" if state.done else "nothing saved yet"
        self._line(f"continuing the download of {self._name} ({saved})")

    def show(self, event: Event) -> None:
        if isinstance(event, Queued):
            now = datetime.fromtimestamp(self._clock.wall(), tz=UTC)
            line = queue_line(event, now=now, tz=self._tz)
            if line != self._last_queue_line:
                self._line(line)
            self._last_queue_line = line
        elif isinstance(event, Started):
            self._last_queue_line = None
            self._last_progress = None
            self._finished_shown = False
            self._line(started_line(event, self._name))
        elif isinstance(event, Progress):
            self._progress(event)
        elif isinstance(event, Retrying):
            self._line(retrying_line(event))
        elif isinstance(event, Completed):
            self._line(completed_line(event))

    def _progress(self, event: Progress) -> None:
        now = self._clock.monotonic()
        finished = event.size is not None and event.done >= event.size
        if finished:
            if self._finished_shown:
                return
            self._finished_shown = True
        elif self._last_progress is not None and now - self._last_progress < (
            PLAIN_PROGRESS_INTERVAL
        ):
            return
        self._last_progress = now
        self._line(progress_line(event.done, event.size, event.rate))

    def restarted(self, message: str) -> None:
        self._line(f"{message}; starting again from zero")

    def failed(self, code: str, message: str, details: Mapping[str, object]) -> None:
        _write_error(self._err, message)

    def close(self) -> None:
        pass


class JsonDisplay:
    """``--json``: one JSON object per event per line on stdout, errors included.

    ``download_id`` tells the id of the download (known from its first checkpoint), so
    ``started`` and ``completed`` name it.
    """

    def __init__(self, out: TextIO, *, download_id: Callable[[], str | None]) -> None:
        self._out = out
        self._download_id = download_id

    def _emit(self, document: Mapping[str, object]) -> None:
        self._out.write(json.dumps(document, separators=(",", ":")) + "\n")
        self._out.flush()

    def resumed(self, state: DownloadState, *, upgraded: bool) -> None:
        self._emit(
            {
                "event": "resumed",
                "downloadId": state.download_id,
                "done": state.done,
                "size": state.size,
                "upgraded": upgraded,
            }
        )

    def waiting(self, until: datetime) -> None:
        self._emit({"event": "waiting", "reason": "not_before", "until": json_time(until)})

    def show(self, event: Event) -> None:
        self._emit(self.document(event))

    def document(self, event: Event) -> dict[str, object]:
        """The JSON object of one event."""
        if isinstance(event, Queued):
            return {
                "event": "queued",
                "position": event.position,
                "startsAt": json_time(event.starts_at),
                "earliest": json_time(event.earliest),
                "latest": json_time(event.latest),
                "startsGuessed": event.guessed,
                "retryAfter": event.retry_after,
                "reason": event.reason,
                "class": event.download_class,
            }
        if isinstance(event, Started):
            return {
                "event": "started",
                "offset": event.offset,
                "size": event.size,
                "downloadId": self._download_id(),
            }
        if isinstance(event, Progress):
            return {
                "event": "progress",
                "done": event.done,
                "size": event.size,
                "rate": round(event.rate, 1),
            }
        if isinstance(event, Retrying):
            return {
                "event": "retrying",
                "reason": event.reason,
                "attempt": event.attempt,
                "delay": round(event.delay, 3),
            }
        return {
            "event": "completed",
            "path": str(event.path.absolute()),
            "size": event.size,
            "etag": event.etag,
            "downloadId": self._download_id(),
        }

    def restarted(self, message: str) -> None:
        self._emit({"event": "restarted", "reason": "object_changed", "message": message})

    def failed(self, code: str, message: str, details: Mapping[str, object]) -> None:
        self._emit({"event": "error", "code": code, "message": message, **details})

    def close(self) -> None:
        pass
