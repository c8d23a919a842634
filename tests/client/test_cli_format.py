"""The words ``arkvoryctl`` prints and the arguments it reads, as pure functions.

The queue line is the one promise R-CLI-1 spells out to the letter
(``queued, 312th, start ≈ 14:05 (in 47 min)``), so it is checked exactly, with a fixed
"now" and time zone. Durations and file names are checked at their edges.
"""

from __future__ import annotations

import io
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from rich.console import Console

from arkvory_client import Completed, Progress, Queued, Retrying, Started
from arkvory_client._cli_parser import output_name, parse_duration
from arkvory_client._render import (
    PlainDisplay,
    clock_time,
    human_duration,
    ordinal,
    progress_line,
    queue_line,
    retrying_line,
    size_text,
)
from arkvory_client._render_tty import TerminalDisplay

from ._support import FakeClock

PLUS_TWO = timezone(timedelta(hours=2))
NOW = datetime(2026, 5, 28, 11, 18, tzinfo=UTC)  # 13:18 at +02:00


def queued_event(
    *,
    position: int | None = 312,
    starts_at: datetime | None = datetime(2026, 5, 28, 12, 5, tzinfo=UTC),
    retry_after: float = 60.0,
    reason: str = "download_queued",
) -> Queued:
    return Queued(
        position=position,
        starts_at=starts_at,
        earliest=starts_at,
        latest=starts_at,
        retry_after=retry_after,
        download_class="release",
        reason=reason,
    )


@pytest.mark.parametrize(
    ("number", "text"),
    [
        (1, "1st"),
        (2, "2nd"),
        (3, "3rd"),
        (4, "4th"),
        (10, "10th"),
        (11, "11th"),
        (12, "12th"),
        (13, "13th"),
        (21, "21st"),
        (22, "22nd"),
        (23, "23rd"),
        (101, "101st"),
        (111, "111th"),
        (112, "112th"),
        (312, "312th"),
        (1001, "1001st"),
    ],
)
def test_ordinals(number: int, text: str) -> None:
    assert ordinal(number) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0 s"),
        (-5, "0 s"),
        (30, "30 s"),
        (59.4, "59 s"),
        (59.6, "1 min"),
        (47 * 60, "47 min"),
        (47 * 60 + 29, "47 min"),
        (3600, "1 h"),
        (2 * 3600 + 5 * 60, "2 h 5 min"),
        (23 * 3600 + 59 * 60, "23 h 59 min"),
        (27 * 3600, "1 d 3 h"),
        (48 * 3600, "2 d"),
    ],
)
def test_human_durations(seconds: float, text: str) -> None:
    assert human_duration(seconds) == text


def test_the_queue_line_of_the_spec() -> None:
    line = queue_line(queued_event(), now=NOW, tz=PLUS_TWO)
    assert line == "queued, 312th, start ≈ 14:05 (in 47 min)"


def test_the_queue_line_of_a_guessed_start() -> None:
    line = queue_line(replace(queued_event(), guessed=True), now=NOW, tz=PLUS_TWO)
    assert line == "queued, 312th, start ≈ 14:05 (in 47 min, a first guess)"


def test_the_queue_line_without_a_position() -> None:
    line = queue_line(queued_event(position=None), now=NOW, tz=PLUS_TWO)
    assert line == "queued, start ≈ 14:05 (in 47 min)"


def test_the_queue_line_hours_ahead_and_due() -> None:
    later = queued_event(starts_at=NOW + timedelta(hours=2, minutes=5), position=2)
    assert queue_line(later, now=NOW, tz=PLUS_TWO) == "queued, 2nd, start ≈ 15:23 (in 2 h 5 min)"
    due = queued_event(starts_at=NOW - timedelta(seconds=3), position=1)
    assert queue_line(due, now=NOW, tz=PLUS_TWO) == "queued, 1st, start ≈ 13:17 (now)"
    soon = queued_event(starts_at=NOW + timedelta(seconds=30), position=1)
    assert queue_line(soon, now=NOW, tz=PLUS_TWO) == "queued, 1st, start ≈ 13:18 (in 30 s)"


def test_a_busy_answer_without_queue_information() -> None:
    for reason in ("busy", "rate_limited", "retry_after"):
        event = queued_event(position=None, starts_at=None, retry_after=12, reason=reason)
        assert queue_line(event, now=NOW) == "server busy, retrying in 12 s"
    counted_down = queued_event(position=None, starts_at=None, retry_after=12, reason="busy")
    assert queue_line(counted_down, now=NOW, retry_in=4) == "server busy, retrying in 4 s"


def test_a_newcomer_whose_place_is_not_known_yet() -> None:
    event = queued_event(position=None, starts_at=None, retry_after=2)
    assert queue_line(event, now=NOW) == "queued, asking again in 2 s"


def test_a_start_on_another_day_names_the_day() -> None:
    tomorrow = datetime(2026, 5, 29, 9, 0, tzinfo=UTC)
    assert clock_time(tomorrow, now=NOW, tz=UTC) == "Fri 09:00"
    far = datetime(2026, 6, 10, 9, 0, tzinfo=UTC)
    assert clock_time(far, now=NOW, tz=UTC) == "2026-06-10 09:00"


def test_sizes_and_progress() -> None:
    assert size_text(512) == "512 B"
    assert size_text(1536) == "1.5 KiB"
    assert size_text(64 * 1024 * 1024) == "64.0 MiB"
    mib = 1024 * 1024
    line = progress_line(12 * mib, 64 * mib, 2 * mib)
    assert line == "12.0 MiB of 64.0 MiB (18 %), 2.0 MiB/s, 26 s left"
    assert progress_line(64 * mib, 64 * mib, 2 * mib) == "64.0 MiB of 64.0 MiB (100 %), 2.0 MiB/s"
    assert progress_line(5 * mib, None, 0) == "5.0 MiB, 0 B/s"


def test_retry_lines_name_the_failure() -> None:
    assert retrying_line(Retrying("connection_error", 2, 3.2)) == (
        "connection lost, retrying in 3 s (attempt 2)"
    )
    assert retrying_line(Retrying("status_502", 1, 1.0)).startswith("the server answered 502")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90.0),
        ("2.5", 2.5),
        ("90s", 90.0),
        ("15m", 900.0),
        ("2h", 7200.0),
        ("1h30m", 5400.0),
        ("1d", 86400.0),
        ("1h0m30s", 3630.0),
        (" 15M ", 900.0),
        ("0", 0.0),
    ],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "h", "-5", "5x", "1m1h", "15 min", "nan", "inf", "1e3"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("url", "name"),
    [
        ("https://host/files/image.tar", "image.tar"),
        ("https://host/files/my%20image.tar?x=1#frag", "my image.tar"),
        ("https://host/files/a%2F..%2Fb.bin", "a_.._b.bin"),
        ("https://host/files/..%5Cwin.exe", ".._win.exe"),
        ("https://host/files/bad%00name%3F.txt", "bad_name_.txt"),
        ("https://host/files/trailing.", "trailing"),
    ],
)
def test_default_file_names(url: str, name: str) -> None:
    assert output_name(url) == name
    assert Path(name).name == name  # never a path


@pytest.mark.parametrize(
    "url", ["https://host/", "https://host", "https://host/files/..", "https://host/%2E"]
)
def test_urls_without_a_file_name(url: str) -> None:
    with pytest.raises(ValueError, match="-o FILE"):
        output_name(url)


def test_plain_progress_is_written_at_most_every_five_seconds_and_at_the_end() -> None:
    clock = FakeClock()
    out = io.StringIO()
    display = PlainDisplay(out, io.StringIO(), name="f.bin", checkpoint="c", clock=clock)
    display.show(Started(0, 100))
    for done in range(10, 101, 10):
        display.show(Progress(done, 100, 10.0))
        clock.advance(1.0)
    display.show(Progress(100, 100, 10.0))  # repeated 100 % is not written again
    display.show(Completed(100, Path("f.bin"), '"v1"'))
    lines = out.getvalue().splitlines()
    assert lines[0] == "downloading f.bin (100 B)"
    assert [line.split(" ", 1)[0] for line in lines[1:-1]] == ["10", "60", "100"]
    assert lines[-1] == "saved f.bin (100 B)"


def test_plain_queue_lines_are_written_when_they_change() -> None:
    clock = FakeClock(wall=NOW.timestamp())
    out = io.StringIO()
    display = PlainDisplay(out, io.StringIO(), name="f", checkpoint="c", clock=clock, tz=PLUS_TWO)
    display.show(queued_event())
    display.show(queued_event())
    display.show(queued_event(position=311))
    assert out.getvalue().splitlines() == [
        "queued, 312th, start ≈ 14:05 (in 47 min)",
        "queued, 311th, start ≈ 14:05 (in 47 min)",
    ]


def test_the_terminal_display_draws_a_status_line_then_a_bar() -> None:
    clock = FakeClock(wall=NOW.timestamp())
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=100, color_system=None)
    display = TerminalDisplay(console, io.StringIO(), name="f.bin", checkpoint="c", clock=clock)
    display.show(queued_event())
    clock.advance(120)
    display.show(Started(0, 1000))
    display.show(Progress(500, 1000, 100.0))
    display.show(Retrying("timeout", 1, 2.0))
    display.show(Progress(1000, 1000, 100.0))
    display.show(Completed(1000, Path("f.bin"), None))
    display.close()
    text = screen.getvalue()
    assert "queued, 312th, start ≈" in text
    assert "queued for 2 min" in text
    assert "━" in text  # the bar
    assert "no answer in time, retrying in 2 s (attempt 1)" in text
    assert "saved f.bin (1000 B)" in text


def test_a_log_in_a_legacy_encoding_gets_plain_characters() -> None:
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="ascii")
    clock = FakeClock(wall=NOW.timestamp())
    display = PlainDisplay(stream, stream, name="f", checkpoint="c", clock=clock, tz=UTC)
    display.show(queued_event())
    stream.flush()
    assert raw.getvalue() == b"queued, 312th, start ~ 12:05 (in 47 min)\n"
