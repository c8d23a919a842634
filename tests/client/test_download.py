"""Downloads end to end against a scripted server, once with ``Client`` and once with
``AsyncClient`` (the same test, parametrised), on a fake clock.

The rules proven: busy answers spend no budget however many (R-CLIENT-1, 2); real
failures stop at exactly five per request and twenty per operation (R-CLIENT-3); faults
mid-range are survived and never leave a file mixing two versions (R-CLIENT-8); resume
from a saved prefix (R-CLIENT-8); id, ticket and class headers (R-CLIENT-6); windows and
the wait limit (R-CLIENT-2, 7); the event stream (R-CLIENT-9).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import anyio
import anyio.lowlevel
import httpx
import pytest

from arkvory_client import (
    MAX_SLEEP_STEP,
    AsyncClient,
    Client,
    Completed,
    DownloadCancelledError,
    DownloadState,
    HTTPStatusError,
    InvalidRequestError,
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
    part_path,
)
from arkvory_client._files import PartFile
from arkvory_client._steps import BodyPlan

from ._support import (
    KINDS,
    WALL_START,
    Answer,
    FakeClock,
    Harness,
    Kind,
    ObjectServer,
    busy,
    dropped_after,
    ignoring_if_range,
    payload,
    problem,
    queued,
    raises,
    rate_limited,
    replaced_by,
    status,
    truncated_to,
)

DATA = payload(10)
NEW = payload(12, seed=2)


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> Kind:
    value: Kind = request.param
    return value


@pytest.fixture
def dest(tmp_path: Path) -> Path:
    return tmp_path / "image.tar"


def harness(kind: Kind, server: ObjectServer, **options: object) -> Harness:
    return Harness(kind, server, **options)  # type: ignore[arg-type]


# ---------------------------------------------------------------------- the happy path
def test_downloads_in_ranges_into_dest(kind: Kind, dest: Path) -> None:
    server = ObjectServer(DATA)
    result = harness(kind, server).download(dest)
    assert dest.read_bytes() == DATA
    assert not part_path(dest).exists()
    assert server.header_values("range") == ["bytes=0-3", "bytes=4-7", "bytes=8-9"]
    assert server.header_values("if-range") == [None, '"v1"', '"v1"']
    assert server.header_values("accept-encoding") == ["identity"] * 3
    assert (result.path, result.size, result.etag, result.failures) == (dest, 10, '"v1"', 0)


def test_iter_download_yields_the_same_events(kind: Kind, tmp_path: Path) -> None:
    first = harness(kind, ObjectServer(DATA).then(queued())).events(tmp_path / "a")
    second = harness(kind, ObjectServer(DATA).then(queued())).iter_events(tmp_path / "b")
    assert [type(e) for e in first] == [type(e) for e in second]
    assert isinstance(second[-1], Completed) and second[-1].path == tmp_path / "b"


def test_the_default_chunk_is_eight_mebibytes(kind: Kind, dest: Path) -> None:
    server = ObjectServer(b"x")
    harness(kind, server, chunk_size=8 * 1024 * 1024).download(dest)
    assert server.header_values("range") == [f"bytes=0-{8 * 1024 * 1024 - 1}"]


def test_a_server_without_ranges_is_read_whole(kind: Kind, dest: Path) -> None:
    server = ObjectServer(DATA, ranges=False)
    result = harness(kind, server).download(dest)
    assert dest.read_bytes() == DATA and result.size == 10
    assert len(server.requests) == 1


def test_an_empty_object(kind: Kind, dest: Path) -> None:
    result = harness(kind, ObjectServer(b"")).download(dest)
    assert dest.read_bytes() == b"" and result.size == 0


def test_an_existing_dest_is_replaced_only_when_complete(kind: Kind, dest: Path) -> None:
    dest.write_bytes(b"previous version")
    server = ObjectServer(DATA).then(serve, status(502), status(502), status(502), status(502))
    server.then(status(502))
    with pytest.raises(RetriesExhaustedError):
        harness(kind, server).download(dest)
    assert dest.read_bytes() == b"previous version"
    assert part_path(dest).read_bytes() == DATA[:4]
    harness(kind, ObjectServer(DATA)).download(dest)
    assert dest.read_bytes() == DATA


def test_an_iterator_never_consumed_touches_nothing(kind: Kind, dest: Path) -> None:
    server = ObjectServer(DATA)
    transport = httpx.MockTransport(server.handler)
    if kind == "sync":
        with Client(transport=transport) as client:
            client.iter_download("https://arkvory.test/f", dest)
    else:

        async def main() -> None:
            async with AsyncClient(transport=transport) as client:
                client.iter_download("https://arkvory.test/f", dest)

        anyio.run(main)
    assert server.requests == [] and not part_path(dest).exists()


# ---------------------------------------------------------------------- headers
def test_the_download_id_is_constant_across_every_request(kind: Kind, dest: Path) -> None:
    server = ObjectServer(DATA).then(queued(), status(502), dropped_after(1), busy())
    result = harness(kind, server).download(dest)
    ids = set(server.header_values("arkvory-download-id"))
    assert ids == {result.download_id}
    assert re.fullmatch(r"[0-9a-f]{32}", result.download_id)
    assert len(server.requests) == 7


def test_a_given_download_id_is_used(kind: Kind, dest: Path) -> None:
    server = ObjectServer(DATA)
    result = harness(kind, server).download(dest, download_id="ci-run-42")
    assert set(server.header_values("arkvory-download-id")) == {"ci-run-42"}
    assert result.download_id == "ci-run-42"


def test_the_last_ticket_received_is_returned(kind: Kind, dest: Path) -> None:
    server = ObjectServer(DATA).then(queued(ticket="2.a.1.x"), queued(ticket="2.a.2.y"), busy())
    harness(kind, server).download(dest)
    assert server.header_values("arkvory-queue-ticket") == [
        None,
        "2.a.1.x",
        "2.a.2.y",
        "2.a.2.y",
        "2.a.2.y",
        "2.a.2.y",
    ]


def test_the_class_header_goes_on_every_request(kind: Kind, dest: Path) -> None:
    server = ObjectServer(DATA).then(queued())
    harness(kind, server).download(dest, download_class="bulk")
    assert server.header_values("arkvory-download-class") == ["bulk"] * 4


def test_without_a_class_no_class_header_is_sent(kind: Kind, dest: Path) -> None:
    server = ObjectServer(DATA)
    harness(kind, server).download(dest)
    assert server.header_values("arkvory-download-class") == [None] * 3


# ---------------------------------------------------------------------- the budget
def test_a_thousand_busy_answers_spend_no_retries(kind: Kind, dest: Path) -> None:
    server = ObjectServer(DATA)
    server.then(queued(retry_after="30"), busy("2"), rate_limited("5"), times=334)
    assert len(server.script) == 1002
    run = harness(kind, server)
    result = run.download(dest)
    assert dest.read_bytes() == DATA
    assert result.failures == 0
    assert len(server.requests) == 1002 + 3
    assert max(run.sleeps.steps) <= MAX_SLEEP_STEP
    asked = 334 * (30 + 2 + 5)
    assert asked <= result.waited <= asked + 1002  # plus at most one second of jitter each
    assert result.waited == pytest.approx(run.sleeps.total)


def test_busy_waits_are_not_capped_by_max_delay(kind: Kind, dest: Path) -> None:
    server = ObjectServer(DATA).then(queued(retry_after="86400"))
    policy = RetryPolicy(max_delay=1.0, busy_jitter=(0.0, 0.0))
    run = harness(kind, server, policy=policy)
    run.download(dest)
    assert run.sleeps.total == 3600.0  # a day is a proxy bug: one hour, then ask again
    assert run.sleeps.steps == [60.0] * 60


FAILURES: list[tuple[str, Answer, str]] = [
    ("connection", raises(httpx.ConnectError), "connection_error"),
    ("timeout", raises(httpx.ReadTimeout), "timeout"),
    ("502", status(502), "status_502"),
    ("504", status(504), "status_504"),
    ("503-without-retry-after", status(503), "status_503"),
    ("dropped-mid-body", dropped_after(0), "connection_error"),
]


@pytest.mark.parametrize(
    ("answer", "reason"), [f[1:] for f in FAILURES], ids=[f[0] for f in FAILURES]
)
def test_real_failures_stop_at_five_attempts_of_one_request(
    kind: Kind, dest: Path, answer: Answer, reason: str
) -> None:
    server = ObjectServer(DATA).then(answer, times=100)
    with pytest.raises(RetriesExhaustedError) as caught:
        harness(kind, server).download(dest)
    assert len(server.requests) == 5
    assert [f.reason for f in caught.value.history] == [reason] * 5
    assert "5 attempts" in str(caught.value)


def test_the_transport_error_is_the_cause(kind: Kind, dest: Path) -> None:
    server = ObjectServer(DATA).then(raises(httpx.ConnectError), times=5)
    with pytest.raises(RetriesExhaustedError) as caught:
        harness(kind, server).download(dest)
    assert isinstance(caught.value.__cause__, httpx.ConnectError)


def test_twenty_failures_per_operation_are_survived_and_the_21st_stops(
    kind: Kind, tmp_path: Path
) -> None:
    five_ranges = payload(20)
    server = ObjectServer(five_ranges)
    for _ in range(5):
        server.then(status(502), status(504), raises(httpx.ConnectError), status(503), serve)
    result = harness(kind, server).download(tmp_path / "a")
    assert result.failures == 20
    assert (tmp_path / "a").read_bytes() == five_ranges

    six_ranges = payload(24)
    server = ObjectServer(six_ranges)
    for _ in range(6):
        server.then(status(502), status(504), raises(httpx.ConnectError), status(503), serve)
    with pytest.raises(RetriesExhaustedError) as caught:
        harness(kind, server).download(tmp_path / "b")
    assert len(caught.value.history) == 21
    assert len(server.requests) == 5 * 5 + 1
    assert "21 failures" in str(caught.value)


def serve(server: ObjectServer, request: httpx.Request) -> httpx.Response:
    return server.serve(request)


def test_busy_answers_between_failures_do_not_reset_the_request_count(
    kind: Kind, dest: Path
) -> None:
    server = ObjectServer(DATA).then(status(502), busy(), times=5)
    with pytest.raises(RetriesExhaustedError):
        harness(kind, server).download(dest)
    assert len(server.requests) == 9  # five failures, four busy answers between them


def test_backoff_is_capped_by_max_delay(kind: Kind, dest: Path) -> None:
    server = ObjectServer(DATA).then(status(502), times=9)
    policy = RetryPolicy(max_attempts=10, max_delay=2.0)
    run = harness(kind, server, policy=policy)
    run.download(dest)
    assert len(run.sleeps.steps) == 9
    assert all(step <= 2.0 for step in run.sleeps.steps)


# ---------------------------------------------------------------------- faults mid-range
def test_a_connection_dropped_mid_range_resumes_where_it_broke(kind: Kind, dest: Path) -> None:
    server = ObjectServer(DATA).then(serve, dropped_after(3))
    result = harness(kind, server).download(dest)
    assert dest.read_bytes() == DATA
    assert server.header_values("range")[:3] == ["bytes=0-3", "bytes=4-7", "bytes=7-9"]
    assert server.header_values("if-range")[2] == '"v1"'
    assert result.failures == 1


def test_a_truncated_body_is_retried_from_its_end(kind: Kind, dest: Path) -> None:
    server = ObjectServer(DATA).then(truncated_to(2))
    events = harness(kind, server).events(dest)
    assert dest.read_bytes() == DATA
    assert server.header_values("range")[1] == "bytes=2-5"
    retrying = [event for event in events if isinstance(event, Retrying)]
    assert len(retrying) == 1
    assert (retrying[0].reason, retrying[0].attempt) == ("truncated_body", 1)
    assert 0.0 <= retrying[0].delay <= 0.5


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> list[bytearray]:
    """The image of every partial file as the client writes it, byte for byte."""
    images: list[bytearray] = []
    begin, write = PartFile.begin, PartFile.write

    def spy_begin(self: PartFile, plan: BodyPlan) -> None:
        begin(self, plan)
        if not images:
            images.append(bytearray())
        if plan.truncate:
            del images[-1][plan.offset :]
        images.append(images[-1][: plan.offset])

    def spy_write(self: PartFile, data: bytes) -> None:
        write(self, data)
        images[-1] += data

    monkeypatch.setattr(PartFile, "begin", spy_begin)
    monkeypatch.setattr(PartFile, "write", spy_write)
    return images


def assert_one_version(images: list[bytearray]) -> None:
    for image in images:
        assert bytes(image) in (DATA[: len(image)], NEW[: len(image)]), "two versions mixed"


def test_the_object_replaced_mid_way_stops_and_never_mixes(
    kind: Kind, dest: Path, disk: list[bytearray]
) -> None:
    server = ObjectServer(DATA).then(serve, replaced_by(NEW, '"v2"'))
    with pytest.raises(ObjectChangedError) as caught:
        harness(kind, server).download(dest)
    assert (caught.value.old_etag, caught.value.new_etag) == ('"v1"', '"v2"')
    assert disk[-1] == DATA[:4]
    assert not dest.exists()
    assert not part_path(dest).exists()  # the v1 prefix is useless now
    result = harness(kind, server).download(dest)  # a restart gets v2 alone
    assert dest.read_bytes() == NEW and result.etag == '"v2"'
    assert_one_version(disk)


def test_a_server_ignoring_if_range_still_cannot_mix_versions(
    kind: Kind, dest: Path, disk: list[bytearray]
) -> None:
    def replace_then_ignore(server: ObjectServer, request: httpx.Request) -> httpx.Response:
        server.data, server.etag = NEW, '"v2"'
        return ignoring_if_range(server, request)

    server = ObjectServer(DATA).then(serve, replace_then_ignore)
    with pytest.raises(ObjectChangedError):
        harness(kind, server).download(dest)
    assert_one_version(disk)
    assert disk[-1] == DATA[:4]
    assert not dest.exists() and not part_path(dest).exists()


def test_a_replacement_after_a_dropped_connection_never_mixes(
    kind: Kind, dest: Path, disk: list[bytearray]
) -> None:
    server = ObjectServer(DATA).then(dropped_after(3), replaced_by(NEW, '"v2"'))
    with pytest.raises(ObjectChangedError):
        harness(kind, server).download(dest)
    assert_one_version(disk)
    assert disk[-1] == DATA[:3]


def test_a_changed_size_with_the_same_etag_is_caught(kind: Kind, dest: Path) -> None:
    server = ObjectServer(DATA).then(serve, replaced_by(DATA + b"tail", '"v1"'))
    with pytest.raises(ObjectChangedError, match="size"):
        harness(kind, server).download(dest)


# ---------------------------------------------------------------------- resume
def test_resume_from_a_saved_prefix_sends_range_and_if_range(kind: Kind, dest: Path) -> None:
    part_path(dest).write_bytes(DATA[:6] + b"unconfirmed")
    saved = DownloadState(download_id="d-1", etag='"v1"', size=10, done=6, ticket="2.t.1.s")
    server = ObjectServer(DATA)
    harness(kind, server).download(dest, state=saved)
    assert dest.read_bytes() == DATA
    first = server.requests[0].headers
    assert first["range"] == "bytes=6-9"
    assert first["if-range"] == '"v1"'
    assert first["arkvory-download-id"] == "d-1"
    assert first["arkvory-queue-ticket"] == "2.t.1.s"


def test_resume_of_a_complete_part_asks_nothing(kind: Kind, dest: Path) -> None:
    part_path(dest).write_bytes(DATA)
    saved = DownloadState(download_id="d-1", etag='"v1"', size=10, done=10)
    server = ObjectServer(DATA)
    result = harness(kind, server).download(dest, state=saved)
    assert server.requests == [] and dest.read_bytes() == DATA and result.size == 10


def test_a_prefix_without_etag_is_downloaded_again(kind: Kind, dest: Path) -> None:
    part_path(dest).write_bytes(b"??????")
    saved = DownloadState(download_id="d-1", etag=None, done=6)
    server = ObjectServer(DATA)
    harness(kind, server).download(dest, state=saved)
    assert dest.read_bytes() == DATA
    assert server.header_values("range")[0] == "bytes=0-3"
    assert server.header_values("arkvory-download-id")[0] == "d-1"


def test_resume_false_starts_over_but_keeps_id_and_ticket(kind: Kind, dest: Path) -> None:
    part_path(dest).write_bytes(DATA[:6])
    saved = DownloadState(download_id="d-1", etag='"v1"', size=10, done=6, ticket="2.t.1.s")
    server = ObjectServer(DATA)
    harness(kind, server).download(dest, state=saved, resume=False)
    first = server.requests[0].headers
    assert first["range"] == "bytes=0-3" and "if-range" not in first
    assert first["arkvory-download-id"] == "d-1"
    assert first["arkvory-queue-ticket"] == "2.t.1.s"


def test_resume_of_a_replaced_object_restarts_cleanly(kind: Kind, dest: Path) -> None:
    part_path(dest).write_bytes(DATA[:6])
    saved = DownloadState(download_id="d-1", etag='"v1"', size=10, done=6)
    server = ObjectServer(NEW, etag='"v2"')
    with pytest.raises(ObjectChangedError):
        harness(kind, server).download(dest, state=saved)
    assert not part_path(dest).exists()
    harness(kind, server).download(dest, state=saved)  # the stale state is harmless now
    assert dest.read_bytes() == NEW


def test_states_are_reported_for_checkpoints(kind: Kind, dest: Path) -> None:
    states: list[DownloadState] = []
    server = ObjectServer(DATA).then(queued(ticket="2.q.1.s"), dropped_after(2))
    result = harness(kind, server).download(dest, on_state=states.append)
    assert states[0] == DownloadState(download_id=result.download_id)
    assert [s.done for s in states] == sorted(s.done for s in states)
    assert states[-1] == DownloadState(
        download_id=result.download_id, etag='"v1"', size=10, done=10, ticket="2.q.1.s"
    )
    assert any(s.done == 2 for s in states)  # the bytes before the drop were checkpointed


def test_a_download_resumed_from_a_reported_state_completes(kind: Kind, dest: Path) -> None:
    states: list[DownloadState] = []
    server = ObjectServer(DATA).then(serve, status(404))
    with pytest.raises(HTTPStatusError):
        harness(kind, server).download(dest, on_state=states.append)
    assert part_path(dest).read_bytes()[: states[-1].done] == DATA[: states[-1].done]
    resumed = ObjectServer(DATA)
    harness(kind, resumed).download(dest, state=states[-1])
    assert dest.read_bytes() == DATA
    assert resumed.header_values("range")[0] == "bytes=4-7"


# ---------------------------------------------------------------------- windows and limits
def test_a_start_later_than_not_after_stops_without_waiting(kind: Kind, dest: Path) -> None:
    server = ObjectServer(DATA).then(queued(starts_at="2026-05-28T23:00:00Z"))
    run = harness(kind, server)
    with pytest.raises(QueueDeadlineError) as caught:
        run.download(dest, not_after="2026-05-28T22:00:00Z")
    assert caught.value.starts_at == datetime(2026, 5, 28, 23, tzinfo=UTC)
    assert run.sleeps.steps == []
    assert len(server.requests) == 1


def test_a_guessed_start_later_than_not_after_does_not_stop_it(kind: Kind, dest: Path) -> None:
    """A cold server's guess (ADR 0042) stops the download only when even its earliest
    start is after ``not_after``: here it may start well before, and it does."""
    guess = queued(starts_at="2026-05-28T23:00:00Z", earliest="2026-05-28T21:00:00Z", guessed=True)
    server = ObjectServer(DATA).then(guess)
    run = harness(kind, server)
    run.download(dest, not_after="2026-05-28T22:00:00Z")
    assert dest.read_bytes() == DATA
    late = ObjectServer(DATA).then(
        queued(starts_at="2026-05-28T23:30:00Z", earliest="2026-05-28T23:00:00Z", guessed=True)
    )
    with pytest.raises(QueueDeadlineError) as caught:
        harness(kind, late).download(dest, not_after="2026-05-28T22:00:00Z")
    assert caught.value.starts_at == datetime(2026, 5, 28, 23, tzinfo=UTC)


def test_not_after_passing_while_queued_stops(kind: Kind, dest: Path) -> None:
    not_after = WALL_START + 100
    server = ObjectServer(DATA).then(queued(retry_after="60", starts_at=None), times=50)
    run = harness(kind, server, policy=RetryPolicy(busy_jitter=(0.0, 0.0)))
    deadline = datetime.fromtimestamp(not_after, tz=UTC)
    with pytest.raises(QueueDeadlineError, match="passed while queued"):
        run.download(dest, not_after=deadline)
    assert run.sleeps.total == pytest.approx(100.0)
    assert len(server.requests) == 3  # at 0, 60, and at the deadline itself


def test_not_before_delays_the_first_request(kind: Kind, dest: Path) -> None:
    moments: list[float] = []
    run = harness(kind, ObjectServer(DATA))

    def note_time(server: ObjectServer, request: httpx.Request) -> httpx.Response:
        moments.append(run.clock.wall())
        return server.serve(request)

    run.server.then(note_time)
    opens = datetime.fromtimestamp(WALL_START + 7200, tz=UTC)
    result = run.download(dest, not_before=opens, wait_limit=1)
    assert moments == [WALL_START + 7200]
    assert max(run.sleeps.steps) <= MAX_SLEEP_STEP
    assert result.waited == 0.0  # the caller's own window is not waiting for the server


def test_the_wait_limit_stops_a_queue_that_does_not_move(kind: Kind, dest: Path) -> None:
    server = ObjectServer(DATA).then(queued(retry_after="100"), times=50)
    run = harness(kind, server, policy=RetryPolicy(busy_jitter=(0.0, 0.0)))
    with pytest.raises(WaitLimitError) as caught:
        run.download(dest, wait_limit=250)
    assert caught.value.waited == pytest.approx(250.0)
    assert len(server.requests) == 4  # at 0, 100, 200 and 250


def test_the_wait_limit_counts_back_off_too(kind: Kind, dest: Path) -> None:
    server = ObjectServer(DATA).then(status(502), times=100)
    run = harness(kind, server, policy=RetryPolicy(backoff_base=10.0, max_attempts=100))
    with pytest.raises(WaitLimitError):
        run.download(dest, wait_limit=0.001)


def test_without_a_wait_limit_a_long_queue_is_waited_out(kind: Kind, dest: Path) -> None:
    server = ObjectServer(DATA).then(queued(retry_after="3600"), times=48)
    result = harness(kind, server).download(dest)
    assert result.waited >= 48 * 3600 and result.failures == 0


# ---------------------------------------------------------------------- events
def test_events_report_queue_then_progress_then_completion(kind: Kind, dest: Path) -> None:
    server = ObjectServer(DATA).then(
        queued(position=2, ticket="2.x.1.s"), queued(position=1), serve, status(502)
    )
    events = harness(kind, server).events(dest)
    names = [type(event).__name__ for event in events]
    assert names == [
        "Queued",
        "Queued",
        "Started",
        "Progress",
        "Retrying",
        "Progress",
        "Progress",
        "Completed",
    ]
    first = events[0]
    assert isinstance(first, Queued)
    start = datetime(2026, 5, 28, 21, tzinfo=UTC)
    assert first == Queued(2, start, start, start, 30.0, "bulk", "download_queued")
    assert events[2] == Started(0, 10)
    assert [e.done for e in events if isinstance(e, Progress)] == [4, 8, 10]
    assert all(e.size == 10 for e in events if isinstance(e, Progress))
    retrying = events[4]
    assert isinstance(retrying, Retrying) and retrying.reason == "status_502"
    assert retrying.attempt == 1 and 0 <= retrying.delay <= 0.5
    assert events[-1] == Completed(size=10, path=dest, etag='"v1"')


def test_a_download_queued_again_mid_way_starts_again(kind: Kind, dest: Path) -> None:
    server = ObjectServer(DATA).then(serve, queued())
    events = harness(kind, server).events(dest)
    started = [e for e in events if isinstance(e, Started)]
    assert started == [Started(0, 10), Started(4, 10)]


# ---------------------------------------------------------------------- errors
def test_a_permanent_status_carries_its_problem(kind: Kind, dest: Path) -> None:
    server = ObjectServer(DATA).then(
        problem(400, "invalid_request", field="Arkvory-Download-Class")
    )
    with pytest.raises(HTTPStatusError) as caught:
        harness(kind, server).download(dest, download_class="platinum")
    assert caught.value.status == 400
    assert caught.value.problem is not None
    assert caught.value.problem["field"] == "Arkvory-Download-Class"
    assert len(server.requests) == 1


def test_a_permanent_status_without_problem(kind: Kind, dest: Path) -> None:
    server = ObjectServer(DATA).then(status(404))
    with pytest.raises(HTTPStatusError) as caught:
        harness(kind, server).download(dest)
    assert (caught.value.status, caught.value.problem) == (404, None)


def test_a_partial_answer_without_content_range_is_invalid(kind: Kind, dest: Path) -> None:
    server = ObjectServer(DATA).then(lambda s, r: httpx.Response(206, content=b"abcd"))
    with pytest.raises(InvalidResponseError):
        harness(kind, server).download(dest)


def test_an_unusable_url_is_an_invalid_request(kind: Kind, tmp_path: Path) -> None:
    if kind == "sync":
        with Client() as client, pytest.raises(InvalidRequestError):
            client.download("http://[::1", tmp_path / "x")
    else:

        async def main() -> None:
            async with AsyncClient() as client:
                await client.download("ftp://example.test/x", tmp_path / "x")

        with pytest.raises(InvalidRequestError):
            anyio.run(main)


def test_cancellation_stops_and_keeps_the_partial_file(kind: Kind, dest: Path) -> None:
    server = ObjectServer(DATA).then(serve, queued())
    run = harness(kind, server)
    states: list[DownloadState] = []
    with pytest.raises(DownloadCancelledError):
        run.download(dest, on_state=states.append, cancelled=lambda: len(server.requests) >= 2)
    assert part_path(dest).read_bytes() == DATA[:4]
    assert states[-1].done == 4


def test_cancelling_the_async_task_keeps_the_partial_file(dest: Path) -> None:
    server = ObjectServer(DATA).then(serve, queued())
    clock = FakeClock()

    async def main() -> bool:
        with anyio.CancelScope() as scope:

            async def sleep(seconds: float) -> None:
                clock.advance(seconds)
                scope.cancel()  # the caller gives up while the download is queued
                await anyio.lowlevel.checkpoint()

            client = AsyncClient(
                transport=httpx.MockTransport(server.handler),
                clock=clock,
                sleep=sleep,
                chunk_size=4,
            )
            async with client:
                await client.download("https://arkvory.test/f", dest)
        return scope.cancelled_caught

    assert anyio.run(main)
    assert part_path(dest).read_bytes() == DATA[:4]
    assert not dest.exists()


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"wait_limit": -1}, "wait_limit"),
        ({"wait_limit": float("nan")}, "wait_limit"),
        ({"download_class": "bad\nclass"}, "download_class"),
        ({"download_id": "x" * 500}, "download_id"),
        ({"not_before": "soon"}, "RFC 3339"),
        ({"not_before": "2026-05-29T00:00:00Z", "not_after": "2026-05-28T00:00:00Z"}, "before"),
    ],
)
def test_unusable_arguments_are_refused_before_touching_files(
    kind: Kind, dest: Path, options: dict[str, object], match: str
) -> None:
    server = ObjectServer(DATA)
    with pytest.raises(ValueError, match=match):
        harness(kind, server).download(dest, **options)
    assert server.requests == [] and not part_path(dest).exists()


def test_clients_refuse_conflicting_configuration() -> None:
    with httpx.Client() as http, pytest.raises(ValueError, match="either"):
        Client(http=http, headers={"Authorization": "x"})
    with pytest.raises(ValueError, match="chunk_size"):
        AsyncClient(chunk_size=0)


def test_a_caller_owned_http_client_is_left_open(dest: Path) -> None:
    server = ObjectServer(DATA)
    with httpx.Client(transport=httpx.MockTransport(server.handler)) as http:
        with Client(http=http) as client:
            client.download("https://arkvory.test/f", dest)
        assert not http.is_closed
    assert dest.read_bytes() == DATA
