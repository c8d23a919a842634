"""The retry policy as a value and the classification of answers (R-CLIENT-1, 3, 4).

Busy answers are waits that never spend the budget and are not capped by ``max_delay``;
real failures spend it, back off with full jitter, and stop at ``max_attempts`` per
request and ``max_retries`` per operation.
"""

from __future__ import annotations

import random
from dataclasses import FrozenInstanceError

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from arkvory_client import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_RETRIES,
    BusyWait,
    Done,
    Fail,
    Failure,
    RetriesExhaustedError,
    Retry,
    RetryPolicy,
    classify,
)

NOW = 1_780_000_000.0


def headers(**values: str) -> httpx.Headers:
    return httpx.Headers({name.replace("_", "-"): value for name, value in values.items()})


@pytest.mark.parametrize(
    ("status", "head", "problem", "expected"),
    [
        (206, {}, None, Done()),
        (200, {}, None, Done()),
        (416, {}, None, Done()),
        (
            503,
            {"retry_after": "30"},
            {"reason": "download_queued"},
            BusyWait(30, "download_queued"),
        ),
        (503, {"retry_after": "2"}, {"reason": "busy"}, BusyWait(2, "busy")),
        (503, {"retry_after": "2"}, None, BusyWait(2, "retry_after")),
        (503, {"retry_after": "86400"}, None, BusyWait(3600, "retry_after")),
        (503, {}, {"reason": "download_queued", "retryAfter": 45}, BusyWait(45, "download_queued")),
        (503, {}, {"reason": "busy"}, BusyWait(5, "busy")),
        (503, {"retry_after": "garbage"}, {"reason": "busy"}, BusyWait(5, "busy")),
        (429, {"retry_after": "10"}, None, BusyWait(10, "rate_limited")),
        (503, {}, None, Retry("status_503")),
        (503, {"retry_after": "garbage"}, None, Retry("status_503")),
        (429, {}, None, Retry("status_429")),
        (502, {}, None, Retry("status_502")),
        (504, {"retry_after": "5"}, None, Retry("status_504")),
        (500, {}, None, Fail("status_500")),
        (404, {}, None, Fail("status_404")),
        (400, {}, {"reason": "invalid_request"}, Fail("status_400")),
        (403, {"retry_after": "5"}, None, Fail("status_403")),
        (304, {}, None, Fail("status_304")),
    ],
)
def test_classify(
    status: int, head: dict[str, str], problem: dict[str, object] | None, expected: object
) -> None:
    assert classify(status, headers(**head), now_wall=NOW, problem=problem) == expected


def test_classify_reads_headers_case_insensitively_from_a_plain_dict() -> None:
    assert classify(503, {"Retry-After": "9"}, now_wall=NOW) == BusyWait(9, "retry_after")


def test_busy_waits_are_not_capped_by_max_delay() -> None:
    policy = RetryPolicy(max_delay=1.0, busy_jitter=(0.0, 0.0))
    assert policy.busy_delay(3600.0, random.Random(1)) == 3600.0


@given(st.floats(10, 3600), st.integers(0, 2**32))
def test_a_wait_of_ten_seconds_or_more_gets_the_whole_jitter(seconds: float, seed: int) -> None:
    policy = RetryPolicy(busy_jitter=(0.5, 2.0))
    delay = policy.busy_delay(seconds, random.Random(seed))
    assert seconds + 0.5 <= delay <= seconds + 2.0


@given(st.floats(0, 10), st.integers(0, 2**32))
def test_a_shorter_wait_gets_its_share_of_the_jitter(seconds: float, seed: int) -> None:
    """The head of a queue, asked back after 1 s, comes within 1.1 s, not up to 2 s."""
    policy = RetryPolicy(busy_jitter=(0.5, 2.0))
    delay = policy.busy_delay(seconds, random.Random(seed))
    share = seconds / 10
    assert seconds + 0.5 * share - 1e-9 <= delay <= seconds + 2.0 * share + 1e-9


def test_the_head_of_a_queue_comes_back_within_a_tenth_of_a_second_of_its_wait() -> None:
    rng = random.Random(7)
    delays = [RetryPolicy().busy_delay(1.0, rng) for _ in range(1000)]
    assert min(delays) >= 1.0 and max(delays) <= 1.1
    assert max(delays) - min(delays) > 0.05  # still spread


def test_defaults() -> None:
    policy = RetryPolicy()
    assert (policy.max_retries, policy.max_attempts) == (DEFAULT_MAX_RETRIES, DEFAULT_MAX_ATTEMPTS)
    assert (policy.max_retries, policy.max_attempts) == (20, 5)
    assert (policy.backoff_base, policy.max_delay, policy.busy_jitter) == (0.5, 30.0, (0.0, 1.0))
    assert policy.history == ()


def test_increment_returns_a_new_policy_and_keeps_the_old() -> None:
    policy = RetryPolicy()
    failure = Failure("status_502", 502, offset=8)
    after = policy.increment(failure)
    assert policy.history == () and policy.request_failures == 0
    assert after.history == (failure,) and after.request_failures == 1
    assert after != policy
    with pytest.raises(FrozenInstanceError):
        after.max_retries = 3  # type: ignore[misc]


def test_the_fifth_failure_of_one_request_stops() -> None:
    policy = RetryPolicy()
    for attempt in range(1, 5):
        policy = policy.increment(Failure("connection_error"))
        assert policy.request_failures == attempt
    cause = httpx.ConnectError("refused")
    with pytest.raises(RetriesExhaustedError) as caught:
        policy.increment(Failure("connection_error", error=cause))
    assert len(caught.value.history) == 5
    assert caught.value.__cause__ is cause


def test_the_twenty_first_failure_of_one_operation_stops() -> None:
    policy = RetryPolicy()
    for _ in range(5):  # five ranges, each failing four times before it succeeds
        for _ in range(4):
            policy = policy.increment(Failure("status_504", 504))
        policy = policy.next_request()
    assert policy.failures == 20 and not policy.is_exhausted
    with pytest.raises(RetriesExhaustedError) as caught:
        policy.increment(Failure("status_504", 504))
    assert len(caught.value.history) == 21


def test_next_request_resets_only_the_request_count() -> None:
    policy = RetryPolicy().increment(Failure("timeout")).increment(Failure("timeout"))
    fresh = policy.next_request()
    assert fresh.request_failures == 0 and fresh.history == policy.history
    assert fresh.next_request() is fresh


@given(st.integers(1, 200), st.integers(0, 2**32))
def test_backoff_is_full_jitter_capped_by_max_delay(failures: int, seed: int) -> None:
    policy = RetryPolicy(max_attempts=1000, max_retries=1000)
    for _ in range(failures):
        policy = policy.increment(Failure("status_502"))
    delay = policy.backoff(random.Random(seed))
    assert 0.0 <= delay <= min(30.0, 0.5 * 2 ** (failures - 1))


def test_backoff_grows_exponentially_until_the_cap() -> None:
    class Top:
        def uniform(self, a: float, b: float, /) -> float:
            return b

    policy = RetryPolicy(max_attempts=100)
    ceilings = []
    for _ in range(8):
        policy = policy.increment(Failure("status_502"))
        ceilings.append(policy.backoff(Top()))
    assert ceilings == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]


@pytest.mark.parametrize(
    "changes",
    [
        {"max_retries": -1},
        {"max_attempts": 0},
        {"backoff_base": -0.1},
        {"max_delay": float("inf")},
        {"max_delay": float("nan")},
        {"busy_jitter": (2.0, 1.0)},
        {"busy_jitter": (-1.0, 1.0)},
    ],
)
def test_invalid_policies_are_refused(changes: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(**changes)  # type: ignore[arg-type]


def test_policy_is_keyword_only() -> None:
    with pytest.raises(TypeError):
        RetryPolicy(20)  # type: ignore[call-arg]
