"""The sans-IO download state machine, fed answers by hand (h11 style).

These tests prove the protocol rules without any transport: the headers of each
request (R-CLIENT-6, 8), the validation that keeps two versions from mixing (R-CLIENT-8),
the queue report (R-CLIENT-9), the window and wait limit (R-CLIENT-2, 7).
"""

from __future__ import annotations

import random
from datetime import UTC, datetime
from pathlib import Path

import pytest

from arkvory_client import (
    Completed,
    InvalidResponseError,
    ObjectChangedError,
    Progress,
    Queued,
    QueueDeadlineError,
    RetriesExhaustedError,
    Retrying,
    RetryPolicy,
    Started,
    WaitLimitError,
    Window,
)
from arkvory_client._policy import Failure
from arkvory_client._range_answers import ContentRange, parse_content_range
from arkvory_client._session import DownloadSession
from arkvory_client._steps import FINISHED, READ_PROBLEM, BodyPlan, Request, Wait

WALL = 1_780_000_000.0
MONO = 50.0
ID = "0123456789abcdef0123456789abcdef"
SIZE = 10


def session(**options: object) -> DownloadSession:
    defaults: dict[str, object] = {
        "path": Path("out.bin"),
        "download_id": ID,
        "rng": random.Random(3),
        "chunk_size": 4,
        "policy": RetryPolicy(busy_jitter=(0.0, 0.0)),
    }
    return DownloadSession("https://arkvory.test/f", **(defaults | options))  # type: ignore[arg-type]


def request(machine: DownloadSession, wall: float = WALL) -> Request:
    step = machine.next_step(wall, MONO)
    assert isinstance(step, Request), step
    return step


def headers_of(step: Request) -> dict[str, str]:
    return dict(step.headers)


def partial(first: int, last: int, etag: str | None = '"v1"', size: int = SIZE) -> dict[str, str]:
    head = {
        "Content-Range": f"bytes {first}-{last}/{size}",
        "Content-Length": str(last - first + 1),
    }
    return head | ({"ETag": etag} if etag is not None else {})


def receive(machine: DownloadSession, status: int, head: dict[str, str], nbytes: int) -> BodyPlan:
    """Ask the next request and answer it with a body of ``nbytes``."""
    request(machine)
    plan = machine.response_head(status, head, MONO)
    assert isinstance(plan, BodyPlan)
    machine.response_data(nbytes, MONO)
    machine.response_end(MONO)
    return plan


def queued_head(**extra: str) -> dict[str, str]:
    return {
        "Content-Type": "application/problem+json",
        "Retry-After": "30",
        "Arkvory-Queue-Position": "312",
        "Arkvory-Starts-At": (
            "2026-05-28T21:00:00Z; earliest=2026-05-28T20:50:00Z; latest=2026-05-28T21:20:00Z"
        ),
        "Arkvory-Queue-Ticket": "2.abc.def.sig",
        "Arkvory-Download-Class": "bulk",
    } | extra


def test_first_request_asks_the_first_chunk_with_the_download_id() -> None:
    step = request(session(download_class="bulk"))
    assert step.method == "GET" and step.offset == 0
    assert headers_of(step) == {
        "Range": "bytes=0-3",
        "Accept-Encoding": "identity",
        "Arkvory-Download-Id": ID,
        "Arkvory-Download-Class": "bulk",
    }


def test_later_ranges_carry_if_range_and_stop_at_the_size() -> None:
    machine = session()
    receive(machine, 206, partial(0, 3), 4)
    receive(machine, 206, partial(4, 7), 4)
    last = request(machine)
    assert headers_of(last)["Range"] == "bytes=8-9"
    assert headers_of(last)["If-Range"] == '"v1"'
    machine.response_head(206, partial(8, 9), MONO)
    machine.response_data(2, MONO)
    machine.response_end(MONO)
    assert machine.next_step(WALL, MONO) is FINISHED
    result = machine.complete()
    assert (result.size, result.etag, result.failures, result.waited) == (10, '"v1"', 0, 0.0)
    events = machine.pop_events()
    assert isinstance(events[0], Started) and events[0] == Started(0, 10)
    assert [e.done for e in events if isinstance(e, Progress)] == [4, 8, 10]
    assert events[-1] == Completed(size=10, path=Path("out.bin"), etag='"v1"')


def test_a_weak_etag_is_compared_but_never_sent_as_if_range() -> None:
    machine = session()
    receive(machine, 206, partial(0, 3, etag='W/"v1"'), 4)
    assert "If-Range" not in headers_of(request(machine))
    with pytest.raises(ObjectChangedError):
        machine.response_head(206, partial(4, 7, etag='W/"v2"'), MONO)


def test_resume_asks_from_the_saved_offset_with_if_range() -> None:
    machine = session(offset=6, etag='"v1"', size=SIZE, ticket="2.old.ticket.sig")
    head = headers_of(request(machine))
    assert head["Range"] == "bytes=6-9"
    assert head["If-Range"] == '"v1"'
    assert head["Arkvory-Queue-Ticket"] == "2.old.ticket.sig"


def test_an_etag_change_between_ranges_raises_before_any_byte_is_written() -> None:
    machine = session()
    receive(machine, 206, partial(0, 3), 4)
    request(machine)
    with pytest.raises(ObjectChangedError) as caught:
        machine.response_head(206, partial(4, 7, etag='"v2"'), MONO)
    assert (caught.value.old_etag, caught.value.new_etag) == ('"v1"', '"v2"')
    assert machine.done == 4


def test_a_size_change_between_ranges_is_a_new_object() -> None:
    machine = session()
    receive(machine, 206, partial(0, 3), 4)
    request(machine)
    with pytest.raises(ObjectChangedError, match="size"):
        machine.response_head(206, partial(4, 7, size=20), MONO)


def test_an_etag_that_disappears_is_refused() -> None:
    machine = session()
    receive(machine, 206, partial(0, 3), 4)
    request(machine)
    with pytest.raises(InvalidResponseError, match="ETag"):
        machine.response_head(206, partial(4, 7, etag=None), MONO)


def test_if_range_answered_whole_with_another_version_means_restart() -> None:
    machine = session()
    receive(machine, 206, partial(0, 3), 4)
    request(machine)
    with pytest.raises(ObjectChangedError):
        machine.response_head(200, {"ETag": '"v2"', "Content-Length": "12"}, MONO)


def test_a_server_that_ignores_range_is_taken_whole_from_zero() -> None:
    machine = session()
    receive(machine, 206, partial(0, 3), 4)
    request(machine)
    plan = machine.response_head(200, {"ETag": '"v1"', "Content-Length": "10"}, MONO)
    assert plan == BodyPlan(offset=0, length=10, truncate=True)


def test_a_whole_answer_at_offset_zero_is_taken() -> None:
    machine = session()
    plan = receive(machine, 200, {"ETag": '"v1"', "Content-Length": "10"}, 10)
    assert plan == BodyPlan(offset=0, length=10, truncate=True)
    assert machine.next_step(WALL, MONO) is FINISHED


def test_a_whole_answer_of_unknown_length_completes_at_its_end() -> None:
    machine = session()
    receive(machine, 200, {}, 123)
    assert machine.next_step(WALL, MONO) is FINISHED
    assert machine.complete().size == 123


@pytest.mark.parametrize(
    ("head", "match"),
    [
        ({"ETag": '"v1"'}, "Content-Range"),
        ({"Content-Range": "bytes 0-3/*"}, "size"),
        ({"Content-Range": "bytes 2-5/10"}, "asked for bytes from 0"),
        ({"Content-Range": "bytes 0-10/10"}, "asked for bytes from 0"),
        ({"Content-Range": "bytes 0-3/10", "Content-Length": "3"}, "Content-Length"),
        ({"Content-Range": "bytes 0-3/10", "Content-Type": "multipart/byteranges"}, "multipart"),
        ({"Content-Range": "bytes 0-3/10", "Content-Encoding": "gzip"}, "gzip"),
    ],
)
def test_broken_partial_answers_are_refused(head: dict[str, str], match: str) -> None:
    machine = session()
    request(machine)
    with pytest.raises(InvalidResponseError, match=match):
        machine.response_head(206, head, MONO)


def test_more_bytes_than_announced_are_refused_before_writing() -> None:
    machine = session()
    request(machine)
    machine.response_head(206, partial(0, 3), MONO)
    machine.response_data(3, MONO)
    with pytest.raises(InvalidResponseError, match="more than"):
        machine.response_data(2, MONO)


def test_a_short_body_is_a_real_failure_and_keeps_its_bytes() -> None:
    machine = session()
    request(machine)
    machine.response_head(206, partial(0, 3), MONO)
    machine.response_data(3, MONO)
    machine.response_end(MONO)
    assert machine.done == 3
    assert machine.policy.failures == 1
    assert machine.policy.request_failures == 0  # it made progress: the next is a new request
    events = machine.pop_events()
    assert isinstance(events[-1], Retrying) and events[-1].reason == "truncated_body"
    wait = machine.next_step(WALL, MONO)
    assert isinstance(wait, Wait) and wait.reason == "backoff"


def test_a_connection_drop_before_any_answer_counts_for_the_request() -> None:
    machine = session()
    for attempt in (1, 2):
        request(machine)
        machine.transport_failed(Failure("connection_error"), MONO)
        assert machine.policy.request_failures == attempt
        wait = machine.next_step(WALL, MONO)
        assert isinstance(wait, Wait)
        machine.wait_over(WALL + wait.seconds, MONO + wait.seconds)


def test_a_failure_after_a_good_range_counts_for_the_new_request() -> None:
    machine = session(policy=RetryPolicy(max_attempts=2))
    receive(machine, 206, partial(0, 3), 4)
    request(machine)
    machine.transport_failed(Failure("connection_error"), MONO)
    assert machine.policy.request_failures == 1  # not reset by the bytes of the last range
    wait = machine.next_step(WALL, MONO)
    assert isinstance(wait, Wait)
    machine.wait_over(WALL, MONO)
    request(machine)
    with pytest.raises(RetriesExhaustedError):
        machine.transport_failed(Failure("connection_error"), MONO)


def test_416_at_the_end_completes() -> None:
    machine = session(offset=10, etag='"v1"', size=SIZE)
    assert machine.next_step(WALL, MONO) is FINISHED
    empty = session()
    request(empty)
    assert empty.response_head(416, {"Content-Range": "bytes */0"}, MONO) is READ_PROBLEM
    empty.response_problem(b"", WALL)
    assert empty.next_step(WALL, MONO) is FINISHED
    assert empty.complete().size == 0


def test_416_for_a_shrunken_object_is_a_change() -> None:
    machine = session()
    receive(machine, 206, partial(0, 3), 4)
    request(machine)
    machine.response_head(416, {"Content-Range": "bytes */2"}, MONO)
    with pytest.raises(ObjectChangedError):
        machine.response_problem(b"", WALL)


def test_a_queue_answer_reports_place_and_start_and_plans_the_wait() -> None:
    machine = session()
    request(machine)
    assert machine.response_head(503, queued_head(), MONO) is READ_PROBLEM
    machine.response_problem(b'{"reason": "download_queued"}', WALL)
    start = datetime(2026, 5, 28, 21, tzinfo=UTC)
    assert machine.pop_events() == [
        Queued(
            position=312,
            starts_at=start,
            earliest=start.replace(minute=50, hour=20),
            latest=start.replace(minute=20),
            retry_after=30.0,
            download_class="bulk",
            reason="download_queued",
        )
    ]
    wait = machine.next_step(WALL, MONO)
    assert wait == Wait(WALL + 30.0, 30.0, "busy")
    machine.wait_over(WALL + 30, MONO + 30)
    assert machine.waited == 30.0
    assert headers_of(request(machine, WALL + 30))["Arkvory-Queue-Ticket"] == "2.abc.def.sig"
    assert machine.policy.failures == 0


def test_a_ticket_from_a_partial_answer_is_echoed_too() -> None:
    machine = session()
    receive(machine, 206, partial(0, 3) | {"Arkvory-Queue-Ticket": "2.new.one.sig"}, 4)
    assert headers_of(request(machine))["Arkvory-Queue-Ticket"] == "2.new.one.sig"
    assert machine.state.ticket == "2.new.one.sig"


def test_a_start_later_than_not_after_stops_at_once() -> None:
    deadline = datetime(2026, 5, 28, 20, tzinfo=UTC)
    machine = session(window=Window(not_after=deadline))
    request(machine, deadline.timestamp() - 7200)
    machine.response_head(503, queued_head(), MONO)
    with pytest.raises(QueueDeadlineError) as caught:
        machine.response_problem(b"", deadline.timestamp() - 7200)
    assert caught.value.starts_at == datetime(2026, 5, 28, 21, tzinfo=UTC)
    assert caught.value.not_after == deadline


def test_the_wait_is_cut_at_not_after_and_the_next_queue_answer_stops() -> None:
    deadline = datetime(2026, 5, 28, 22, tzinfo=UTC)
    now = deadline.timestamp() - 10
    machine = session(window=Window(not_after=deadline))
    request(machine, now)
    machine.response_head(503, queued_head(), MONO)
    machine.response_problem(b"", now)
    wait = machine.next_step(now, MONO)
    assert isinstance(wait, Wait) and wait.seconds == 10.0
    machine.wait_over(now + 10, MONO + 10)
    request(machine, now + 10)
    machine.response_head(503, queued_head(), MONO + 10)
    with pytest.raises(QueueDeadlineError, match="passed while queued"):
        machine.response_problem(b"", now + 10)


def test_not_after_already_passed_stops_before_asking() -> None:
    deadline = datetime.fromtimestamp(WALL - 1, tz=UTC)
    with pytest.raises(QueueDeadlineError, match="before the download started"):
        session(window=Window(not_after=deadline)).next_step(WALL, MONO)


def test_not_before_is_waited_first_and_not_counted_as_waiting() -> None:
    opens = datetime.fromtimestamp(WALL + 3600, tz=UTC)
    machine = session(window=Window(not_before=opens), wait_limit=10.0)
    wait = machine.next_step(WALL, MONO)
    assert wait == Wait(WALL + 3600, 3600.0, "not_before")
    machine.wait_over(WALL + 3600, MONO + 3600)
    assert machine.waited == 0.0
    assert request(machine, WALL + 3600).offset == 0


def test_the_wait_limit_cuts_the_last_wait_then_stops() -> None:
    machine = session(wait_limit=45.0)
    now, mono = WALL, MONO
    for expected in (30.0, 15.0):
        request(machine, now)
        machine.response_head(503, queued_head(), mono)
        machine.response_problem(b"", now)
        wait = machine.next_step(now, mono)
        assert isinstance(wait, Wait) and wait.seconds == expected
        now, mono = now + expected, mono + expected
        machine.wait_over(now, mono)
    request(machine, now)
    machine.response_head(503, queued_head(), mono)
    with pytest.raises(WaitLimitError) as caught:
        machine.response_problem(b"", now)
    assert (caught.value.waited, caught.value.wait_limit) == (45.0, 45.0)


def test_a_call_out_of_order_raises_and_changes_nothing() -> None:
    machine = session()
    with pytest.raises(RuntimeError, match="expected awaiting_head"):
        machine.response_head(206, partial(0, 3), MONO)
    assert machine.state.done == 0
    request(machine)
    with pytest.raises(RuntimeError):
        machine.next_step(WALL, MONO)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("bytes 0-3/10", ContentRange(0, 3, 10)),
        ("bytes */10", ContentRange(None, None, 10)),
        ("bytes 0-3/*", ContentRange(0, 3, None)),
        ("BYTES 4-7/8", ContentRange(4, 7, 8)),
        ("bytes 5-3/10", None),
        ("bytes 0-3", None),
        ("items 0-3/10", None),
        (None, None),
    ],
)
def test_content_range(value: str | None, expected: ContentRange | None) -> None:
    assert parse_content_range(value) == expected


@pytest.mark.parametrize(
    "options",
    [{"chunk_size": 0}, {"wait_limit": -1.0}, {"offset": 11, "size": 10}, {"download_id": ""}],
)
def test_invalid_sessions_are_refused(options: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        session(**options)
