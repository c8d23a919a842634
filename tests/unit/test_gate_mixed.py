"""What the gate's mixed crowd reads from curl and from the samples, pinned down.

A wrong parse of curl's log or a wrong count of idle slots would report a wrong figure
without failing, so the log of a real curl 7.88 run and small sample series fix them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from benchmarks._gate_curl import parse_log, starts_at
from benchmarks._gate_mixed import CURL_KINDS, Mix, idle_while_waiting
from benchmarks._gate_report import told_quality
from benchmarks.gate import FULL, QUICK

# Two attempts of one curl process (-sS -v --trace-time --fail --retry ...), trimmed.
LOG = """\
09:52:16.355029 *   Trying 127.0.0.1:18999...
09:52:16.355418 > GET /files/large/image-1.bin HTTP/1.1
09:52:16.355418 > Host: 127.0.0.1:18999
09:52:18.356185 < HTTP/1.1 503 Service Unavailable
09:52:18.356255 < retry-after: 5
09:52:18.356270 < arkvory-starts-at: 2026-12-06T09:52:30Z; earliest=2026-12-06T09:52:28Z; \
latest=2026-12-06T09:52:32Z
09:52:18.356280 < arkvory-queue-position: 40
09:52:18.356302 * The requested URL returned error: 503
curl: (22) The requested URL returned error: 503
09:52:23.358554 *   Trying 127.0.0.1:18999...
09:52:23.359027 > GET /files/large/image-1.bin HTTP/1.1
09:52:24.363032 < HTTP/1.1 200 OK
09:52:24.363086 < content-length: 8388608
09:52:24.363178 { [65536 bytes data]
"""


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def test_every_attempt_is_read_with_what_it_was_told_on_the_clock_of_the_first_line() -> None:
    began = 1000.0
    first, second = parse_log(LOG, began)
    assert first["at"] == pytest.approx(began + 0.000389)
    assert first["status"] == 503 and first["retry_after"] == 5 and first["position"] == 40
    assert first["answered"] == pytest.approx(began + 2.001156)
    assert first["starts_at"] == (
        _epoch("2026-12-06T09:52:30"),
        _epoch("2026-12-06T09:52:28"),
        _epoch("2026-12-06T09:52:32"),
    )
    assert second["status"] == 200 and second["starts_at"] is None
    assert second["answered"] == pytest.approx(began + 8.008003)
    assert not first["guessed"]


def test_a_start_on_a_guessed_rate_is_read_as_such() -> None:
    guessed = LOG.replace("latest=2026-12-06T09:52:32Z", "latest=2026-12-06T09:52:32Z; basis=guess")
    first, _ = parse_log(guessed, 1000.0)
    assert first["guessed"]
    assert first["starts_at"][2] == _epoch("2026-12-06T09:52:32")


def test_a_guessed_first_answer_is_judged_by_its_interval_and_the_next_by_its_error() -> None:
    """ADR 0042: a download first told a guess (start 30 s off, inside its interval) and
    then a start 1 s off on a measured rate scores that 1 s; one told only a guess counts
    for the interval, not for the error."""
    told: dict[str, Any] = {"arrival": 0.0, "start": 20.0, "earliest": 2.0, "latest": 400.0}
    records: list[dict[str, Any]] = [
        told | {"estimate": 21.0, "guessed": True},
        told | {"estimate": None, "guessed": True},
    ]
    scored, bound_p95, inside = told_quality(records, 1 << 20, 0.0)
    assert scored == [records[0]]
    assert bound_p95 == pytest.approx(1.0 / 2.0)
    assert inside == 1.0


def test_a_log_that_passes_midnight_keeps_counting_forward() -> None:
    log = "23:59:59.500000 > GET / HTTP/1.1\n00:00:01.000000 < HTTP/1.1 200 OK\n"
    (attempt,) = parse_log(log, 50.0)
    assert attempt["at"] == 50.0 and attempt["answered"] == pytest.approx(51.5)


def test_a_request_without_an_answer_has_no_status() -> None:
    (attempt,) = parse_log("10:00:00.000000 > GET / HTTP/1.1\ncurl: (7) refused\n", 5.0)
    assert attempt == {"at": 5.0, "status": None}


def test_starts_at_without_an_interval_is_a_point() -> None:
    point = _epoch("2026-12-06T10:00:00")
    assert starts_at("2026-12-06T10:00:00Z") == (point, point, point)


@pytest.mark.parametrize("downloads", [QUICK.downloads, FULL.downloads])
def test_at_least_three_in_ten_downloads_are_curl_and_every_kind_is_there(downloads: int) -> None:
    kinds = Mix().kinds(downloads)
    assert kinds == Mix().kinds(downloads)  # the same crowd every run
    assert sum(kind != "sdk" for kind in kinds) >= 0.3 * downloads
    assert all(kind in kinds for kind in CURL_KINDS)


def test_idle_slots_count_only_while_someone_waits() -> None:
    records = [{"arrival": 0.5, "start": 2.9, "stop": 9.0}]
    active = [(0.0, 9), (1.0, 7), (2.0, 8), (3.0, 6), (4.0, 9)]
    idle, longest = idle_while_waiting(records, active, slots=9)
    assert idle == pytest.approx(2 + 1)  # 6 held after 3.0, but nobody waits then
    assert longest == pytest.approx(2.0)


def test_a_stretch_ends_when_every_slot_is_held_again() -> None:
    records = [{"arrival": 0.0, "start": None, "stop": 10.0}]
    active = [(0.0, 8), (1.0, 9), (2.0, 8), (3.0, 8), (4.0, 8), (5.0, 9)]
    idle, longest = idle_while_waiting(records, active, slots=9)
    assert (idle, longest) == (4.0, 3.0)


def test_a_stretch_is_one_slots_not_the_time_some_slot_was_free() -> None:
    """Slots freeing in turn, each taken again a second later: always one free, yet no
    slot stayed empty for more than a second."""
    records = [{"arrival": 0.0, "start": None, "stop": 10.0}]
    active = [(float(t), 8) for t in range(6)] + [(6.0, 9)]
    idle, longest = idle_while_waiting(records, active, slots=9)
    assert idle == 6.0
    assert longest == 6.0  # the same count throughout: nothing says a slot was retaken
    turnover = [(0.0, 8), (1.0, 9), (1.0, 8), (2.0, 9), (2.0, 8), (3.0, 9)]
    idle, longest = idle_while_waiting(records, turnover, slots=9)
    assert (idle, longest) == (3.0, 1.0)
