"""The retry budget against random answer sequences, checked with a model (R-CLIENT-1, 3).

Hypothesis scripts the server with any mix of queue/busy/429 answers, real failures
(502, 504, connection refused, timeout, a connection dropped before or after some bytes)
and good ranges. A few lines of arithmetic predict what must happen: busy answers cost
nothing; every real failure is in ``history``; the download stops on the fifth failure
of one request or the twenty-first of the operation, and otherwise completes with the
right bytes after exactly the predicted number of requests.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from arkvory_client import MAX_SLEEP_STEP, RetriesExhaustedError, RetryPolicy

from ._support import (
    KINDS,
    Answer,
    Harness,
    Kind,
    ObjectServer,
    busy,
    dropped_after,
    payload,
    queued,
    raises,
    rate_limited,
    status,
)

SIZE, CHUNK = 12, 4
DATA = payload(SIZE)
BUSY = {  # answer, and the seconds it asks for
    "queued": (queued(retry_after="30"), 30),
    "busy": (busy("2"), 2),
    "429": (rate_limited("5"), 5),
}
FAILURES = {
    "502": status(502),
    "504": status(504),
    "503-bare": status(503),
    "refused": raises(httpx.ConnectError),
    "timeout": raises(httpx.ReadTimeout),
    "dropped": dropped_after(0),
}
PARTIAL = "dropped-after-2"
OUTCOMES = [*BUSY, *FAILURES, PARTIAL, "ok"]


def serve(server: ObjectServer, request: httpx.Request) -> httpx.Response:
    return server.serve(request)


def answer(outcome: str) -> Answer:
    if outcome in BUSY:
        return BUSY[outcome][0]
    if outcome in FAILURES:
        return FAILURES[outcome]
    return dropped_after(2) if outcome == PARTIAL else serve


@dataclass
class Expected:
    requests: int
    failures: int
    exhausted: bool
    asked_to_wait: float


def model(script: list[str], policy: RetryPolicy) -> Expected:
    """What the client must do, computed without it."""
    offset = requests = failures = request_failures = 0
    asked = 0.0
    for outcome in [*script, *["ok"] * (SIZE // CHUNK + 1)]:
        if offset == SIZE:
            break
        requests += 1
        if outcome in BUSY:
            asked += BUSY[outcome][1]
            continue
        if outcome == "ok":
            offset += min(CHUNK, SIZE - offset)
            request_failures = 0
            continue
        progressed = outcome == PARTIAL and offset < SIZE
        if progressed:
            offset += min(2, SIZE - offset)
            request_failures = 0  # the failed request made progress: it counts alone
        failures += 1
        request_failures += 1
        if failures > policy.max_retries or request_failures >= policy.max_attempts:
            return Expected(requests, failures, True, asked)
        if progressed:
            request_failures = 0  # and the next request is a new one
    return Expected(requests, failures, False, asked)


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=120, deadline=None)
@given(script=st.lists(st.sampled_from(OUTCOMES), max_size=60))
def test_busy_answers_are_free_and_failures_are_counted_exactly(
    kind: Kind, script: list[str]
) -> None:
    policy = RetryPolicy()
    expected = model(script, policy)
    event("exhausted" if expected.exhausted else "completed")
    server = ObjectServer(DATA).then(*map(answer, script))
    run = Harness(kind, server, policy=policy, chunk_size=CHUNK)
    with tempfile.TemporaryDirectory() as directory:
        dest = Path(directory) / "object"
        if expected.exhausted:
            with pytest.raises(RetriesExhaustedError) as caught:
                run.download(dest)
            history = caught.value.history
            assert len(history) == expected.failures
        else:
            result = run.download(dest)
            assert result.failures == expected.failures
            assert dest.read_bytes() == DATA
            assert result.waited == pytest.approx(run.sleeps.total)
    assert len(server.requests) == expected.requests
    assert all(step <= MAX_SLEEP_STEP for step in run.sleeps.steps)
    assert run.sleeps.total >= expected.asked_to_wait  # busy waits: the full time asked


@settings(max_examples=60, deadline=None)
@given(
    script=st.lists(st.sampled_from(OUTCOMES), max_size=40),
    max_retries=st.integers(0, 6),
    max_attempts=st.integers(1, 4),
)
def test_the_model_holds_for_any_budget(
    script: list[str], max_retries: int, max_attempts: int
) -> None:
    policy = RetryPolicy(max_retries=max_retries, max_attempts=max_attempts)
    expected = model(script, policy)
    server = ObjectServer(DATA).then(*map(answer, script))
    run = Harness("sync", server, policy=policy, chunk_size=CHUNK)
    with tempfile.TemporaryDirectory() as directory:
        dest = Path(directory) / "object"
        if expected.exhausted:
            with pytest.raises(RetriesExhaustedError) as caught:
                run.download(dest)
            assert len(caught.value.history) == expected.failures
        else:
            assert run.download(dest).failures == expected.failures
    assert len(server.requests) == expected.requests
