"""The retry policy as a value, and the pure classification of an HTTP answer.

Two kinds of "not now" must never be confused (R-CLIENT-1, R-CLIENT-3):

* **busy** — ``503``/``429`` with ``Retry-After``, or a ``503`` whose problem reason is
  ``download_queued``/``busy``. The server is working as designed and said when to come
  back. The client waits that long (plus jitter), however long (up to the one-hour cap of
  ``Retry-After``); nothing is spent from the retry budget and ``max_delay`` does not
  apply.
* **failure** — a dropped connection, ``502``/``504``, a ``503`` without ``Retry-After``,
  a timeout, a truncated body. These spend the budget and are retried after an
  exponential back-off with full jitter, capped by ``max_delay``.

:class:`RetryPolicy` is immutable like urllib3's ``Retry``: :meth:`RetryPolicy.increment`
returns a new policy with one more entry in ``history``. It never reads a clock or a
random source; the caller passes an RNG to :meth:`RetryPolicy.backoff`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final, Protocol

from ._exceptions import RetriesExhaustedError
from ._retry_after import parse_retry_after

__all__ = [
    "BUSY_FALLBACK_SECONDS",
    "DEFAULT_BACKOFF_BASE",
    "DEFAULT_BUSY_JITTER",
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_MAX_DELAY",
    "DEFAULT_MAX_RETRIES",
    "QUEUE_REASONS",
    "Action",
    "BusyWait",
    "Done",
    "Fail",
    "Failure",
    "RandomSource",
    "Retry",
    "RetryPolicy",
    "classify",
]

DEFAULT_MAX_RETRIES: Final = 20
DEFAULT_MAX_ATTEMPTS: Final = 5
DEFAULT_BACKOFF_BASE: Final = 0.5
DEFAULT_MAX_DELAY: Final = 30.0
DEFAULT_BUSY_JITTER: Final = (0.0, 1.0)
BUSY_JITTER_FULL_SECONDS: Final = 10.0
"""Busy waits this long or longer get the whole ``busy_jitter``; shorter ones a share."""
BUSY_FALLBACK_SECONDS: Final = 5.0
"""Wait for a queue answer whose ``Retry-After`` was lost on the way (a stripping proxy)."""
QUEUE_REASONS: Final = frozenset({"download_queued", "busy"})
"""Problem reasons (SPEC §16) that mean "come back later" even without ``Retry-After``."""
_MAX_EXPONENT: Final = 60


class RandomSource(Protocol):
    """What the policy needs from an RNG; ``random.Random`` satisfies it."""

    def uniform(self, a: float, b: float, /) -> float: ...


@dataclass(frozen=True, slots=True)
class Failure:
    """One real failure, as recorded in :attr:`RetryPolicy.history`.

    ``reason`` is a short machine word: ``connection_error``, ``timeout``,
    ``protocol_error``, ``truncated_body`` or ``status_<code>``. ``offset`` is the byte
    the failed request started at. ``error`` is the underlying exception, if any (not
    compared).
    """

    reason: str
    status: int | None = None
    offset: int = 0
    error: BaseException | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How many real failures a download survives, and how long it backs off after each.

    ``max_retries`` failures may be retried per operation (the 21st failure of a download
    stops it with the default 20); ``max_attempts`` is the most attempts of one request
    (the 5th failure of the same range stops it). A request that delivered bytes before
    failing made progress: the next request is a new one with a fresh attempt count.
    ``backoff_base``/``max_delay`` shape the full-jitter back-off; ``busy_jitter`` is the
    ``(low, high)`` range of random seconds added to a busy wait of 10 s or more so that
    a thousand clients told the same ``Retry-After`` do not return in the same instant;
    a shorter wait gets the same share of it as of 10 s (ADR 0028).

    ``history`` and ``request_failures`` are the state; a fresh policy has none.
    """

    max_retries: int = DEFAULT_MAX_RETRIES
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    backoff_base: float = DEFAULT_BACKOFF_BASE
    max_delay: float = DEFAULT_MAX_DELAY
    busy_jitter: tuple[float, float] = DEFAULT_BUSY_JITTER
    history: tuple[Failure, ...] = ()
    request_failures: int = 0

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError("max_retries must be at least 0")
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        for name in ("backoff_base", "max_delay"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number of seconds, at least 0")
        low, high = self.busy_jitter
        if not (math.isfinite(low) and math.isfinite(high) and 0 <= low <= high):
            raise ValueError("busy_jitter must be (low, high) with 0 <= low <= high")
        if self.request_failures < 0:
            raise ValueError("request_failures must be at least 0")

    @property
    def failures(self) -> int:
        """Real failures so far in this operation."""
        return len(self.history)

    @property
    def is_exhausted(self) -> bool:
        """True when the last failure may not be retried."""
        return len(self.history) > self.max_retries or self.request_failures >= self.max_attempts

    def increment(self, failure: Failure) -> RetryPolicy:
        """Record ``failure`` and return the new policy.

        Raises :class:`RetriesExhaustedError` (from ``failure.error``) when the failure
        may not be retried; its ``history`` includes this last failure.
        """
        new = replace(
            self,
            history=(*self.history, failure),
            request_failures=self.request_failures + 1,
        )
        if new.is_exhausted:
            if new.request_failures >= new.max_attempts:
                why = f"{new.request_failures} attempts of one request failed"
            else:
                why = f"{new.failures} failures in one download (max_retries={new.max_retries})"
            raise RetriesExhaustedError(
                f"giving up: {why}; last: {failure.reason}", history=new.history
            ) from failure.error
        return new

    def next_request(self) -> RetryPolicy:
        """The policy for a new request after progress: the attempt count starts again."""
        return self if self.request_failures == 0 else replace(self, request_failures=0)

    def backoff(self, rng: RandomSource) -> float:
        """Seconds to wait before retrying after the current request's last failure.

        Full jitter: uniform in ``[0, min(max_delay, backoff_base * 2 ** (n - 1))]`` for
        the ``n``-th failure of the request.
        """
        if self.request_failures == 0:
            return 0.0
        exponent = min(self.request_failures - 1, _MAX_EXPONENT)
        ceiling = min(self.max_delay, self.backoff_base * 2.0**exponent)
        return rng.uniform(0.0, ceiling)

    def busy_delay(self, seconds: float, rng: RandomSource) -> float:
        """The wait for a busy answer: what the server asked plus ``busy_jitter``,
        scaled down for waits under :data:`BUSY_JITTER_FULL_SECONDS`.

        The scaling is for the head of a queue: it is asked back after 1 s because its
        slot frees any moment, and a whole second of jitter on top let waiters further
        back, which came on time, take the slot first (ADR 0028). Spreading by a share
        of the wait still keeps a crowd told the same short wait apart.

        Not capped by ``max_delay`` (R-CLIENT-1); ``seconds`` is already at most one
        hour, see :func:`~arkvory_client.parse_retry_after`.
        """
        low, high = self.busy_jitter
        seconds = max(seconds, 0.0)
        if high <= 0:
            return seconds
        share = min(1.0, seconds / BUSY_JITTER_FULL_SECONDS)
        return seconds + share * rng.uniform(low, high)


@dataclass(frozen=True, slots=True)
class Done:
    """The answer is final for this request and the download reads it (2xx, ``416``)."""


@dataclass(frozen=True, slots=True)
class BusyWait:
    """Come back after ``seconds``; ``reason`` is ``download_queued``, ``busy``,
    ``rate_limited`` or ``retry_after``. Spends no budget."""

    seconds: float
    reason: str


@dataclass(frozen=True, slots=True)
class Retry:
    """A real failure: spend budget, back off, retry. ``reason`` is ``status_<code>``."""

    reason: str


@dataclass(frozen=True, slots=True)
class Fail:
    """A status that retrying cannot fix."""

    reason: str


Action = Done | BusyWait | Retry | Fail

DONE: Final = Done()


def classify(
    status: int,
    headers: Mapping[str, str],
    *,
    now_wall: float,
    problem: Mapping[str, Any] | None = None,
) -> Action:
    """What to do with an answer of ``status`` (pure; ``now_wall`` dates ``Retry-After``).

    ``headers`` is looked up by lower-case name (``httpx.Headers`` is case-insensitive);
    ``problem`` is the parsed problem document, when the body was one.

    * 2xx and ``416`` → :class:`Done`;
    * ``503`` with ``Retry-After``, or with reason ``download_queued``/``busy`` →
      :class:`BusyWait` (the problem's ``retryAfter`` or :data:`BUSY_FALLBACK_SECONDS`
      when the header was lost);
    * ``429`` with ``Retry-After`` → :class:`BusyWait`;
    * ``503``/``429`` without either, ``502``, ``504`` → :class:`Retry`;
    * anything else → :class:`Fail`.
    """
    if 200 <= status < 300 or status == 416:
        return DONE
    reason = problem.get("reason") if problem is not None else None
    retry_after = parse_retry_after(_header(headers, "retry-after"), now_wall)
    if status == 503:
        if retry_after is not None:
            return BusyWait(retry_after, reason if isinstance(reason, str) else "retry_after")
        if reason in QUEUE_REASONS:
            assert isinstance(reason, str)
            return BusyWait(_problem_retry_after(problem), reason)
        return Retry("status_503")
    if status == 429:
        if retry_after is not None:
            return BusyWait(retry_after, "rate_limited")
        return Retry("status_429")
    if status in (502, 504):
        return Retry(f"status_{status}")
    return Fail(f"status_{status}")


def _problem_retry_after(problem: Mapping[str, Any] | None) -> float:
    value = problem.get("retryAfter") if problem is not None else None
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = parse_retry_after(str(int(value)) if math.isfinite(value) else None, 0.0)
        if seconds is not None:
            return seconds
    return BUSY_FALLBACK_SECONDS


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is not None:
        return value
    for key, candidate in headers.items():
        if key.lower() == name:
            return candidate
    return None
