"""The download as a sans-IO state machine, shared by the sync and the async client.

Rules of this file: no socket, no file, no clock, no sleep. The machine is told the time
(``now_wall``, ``now_mono``) and what happened; it answers with the next thing to do —
a :class:`Request` to send, a :class:`Wait` to sleep, a :class:`BodyPlan` for where a
response body goes, or :data:`FINISHED`. All protocol decisions live here, once:

* every request carries ``Range`` (``chunk_size`` bytes, 8 MiB by default), the
  client-generated ``Arkvory-Download-Id``, the last ``Arkvory-Queue-Ticket`` received
  and the optional ``Arkvory-Download-Class`` (R-CLIENT-6);
* once bytes are saved, the object's ``ETag`` guards every later range: it goes out as
  ``If-Range`` and must come back unchanged, as must the size. Otherwise
  :class:`ObjectChangedError` is raised *before* a byte of the other version is handed
  out for writing, so a file never mixes two versions (R-CLIENT-8);
* busy answers become waits that spend nothing; real failures spend the
  :class:`RetryPolicy` budget and back off (R-CLIENT-1..3);
* ``not_after`` and ``wait_limit`` bound the waiting, not the transfer (R-CLIENT-2, 7).

A driver loops::

    while not isinstance(step := session.next_step(wall, mono), Finished):
        if isinstance(step, Wait):   sleep until step.until_wall; session.wait_over(...)
        else:                        send step; session.response_head(...) and then
                                     response_data()/response_end() for a BodyPlan,
                                     or response_problem(body) for READ_PROBLEM;
                                     transport_failed() when the exchange breaks
        deliver session.pop_events()
"""

from __future__ import annotations

import enum
import json
import math
import re
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ._events import (
    Completed,
    DownloadResult,
    DownloadState,
    Event,
    Progress,
    Queued,
    Retrying,
    Started,
)
from ._exceptions import (
    HTTPStatusError,
    InvalidResponseError,
    ObjectChangedError,
    QueueDeadlineError,
    WaitLimitError,
)
from ._policy import BusyWait, Done, Fail, Failure, RandomSource, Retry, RetryPolicy, classify
from ._retry_after import StartsAt, parse_queue_position, parse_starts_at
from ._windows import Window

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "FINISHED",
    "PROBLEM_BODY_LIMIT",
    "READ_PROBLEM",
    "BodyPlan",
    "ContentRange",
    "DownloadSession",
    "Finished",
    "ReadProblem",
    "Request",
    "Wait",
    "parse_content_range",
]

DEFAULT_CHUNK_SIZE: Final = 8 * 1024 * 1024
PROBLEM_BODY_LIMIT: Final = 64 * 1024
"""The most bytes of an error body read to find a problem document."""
PROGRESS_INTERVAL: Final = 0.5
"""Seconds between ``Progress`` events inside one response (one more at its end)."""
_RATE_WINDOW: Final = 10.0

DOWNLOAD_ID_HEADER: Final = "Arkvory-Download-Id"
DOWNLOAD_CLASS_HEADER: Final = "Arkvory-Download-Class"
TICKET_HEADER: Final = "Arkvory-Queue-Ticket"
_MAX_TICKET: Final = 512


@dataclass(frozen=True, slots=True)
class Request:
    """One GET to send, exactly as the machine wants it on the wire."""

    method: str
    url: str
    headers: tuple[tuple[str, str], ...]
    offset: int


@dataclass(frozen=True, slots=True)
class Wait:
    """Sleep until the wall clock reads ``until_wall``; ``seconds`` is the planned length.

    ``reason`` is ``not_before``, ``busy`` or ``backoff``; only the last two count
    against ``wait_limit``.
    """

    until_wall: float
    seconds: float
    reason: str


@dataclass(frozen=True, slots=True)
class Finished:
    """The object is complete: commit the file, then call ``complete()``."""


FINISHED: Final = Finished()


@dataclass(frozen=True, slots=True)
class BodyPlan:
    """Where a response body goes: written from file position ``offset``, ``length``
    bytes (``None``: until the body ends). With ``truncate`` everything from ``offset``
    on is discarded first (a whole-object ``200`` replaces what was saved)."""

    offset: int
    length: int | None
    truncate: bool


@dataclass(frozen=True, slots=True)
class ReadProblem:
    """Not a body to save: read at most :data:`PROBLEM_BODY_LIMIT` bytes of it and pass
    them to ``response_problem()``."""


READ_PROBLEM: Final = ReadProblem()

Step = Request | Wait | Finished


@dataclass(frozen=True, slots=True)
class ContentRange:
    """A parsed ``Content-Range``: ``first``..``last`` inclusive (``None`` for ``*``) of
    ``size`` bytes (``None`` when the server does not know)."""

    first: int | None
    last: int | None
    size: int | None


_CONTENT_RANGE = re.compile(r"bytes\s+(?:(\d{1,19})-(\d{1,19})|\*)/(\d{1,19}|\*)", re.IGNORECASE)
_CONTENT_LENGTH = re.compile(r"\d{1,19}")


def parse_content_range(value: str | None) -> ContentRange | None:
    """``bytes a-b/n``, ``bytes */n`` or ``bytes a-b/*``; ``None`` when malformed."""
    if value is None:
        return None
    match = _CONTENT_RANGE.fullmatch(value.strip())
    if match is None:
        return None
    first = int(match[1]) if match[1] is not None else None
    last = int(match[2]) if match[2] is not None else None
    size = int(match[3]) if match[3] != "*" else None
    if first is not None and last is not None and last < first:
        return None
    return ContentRange(first, last, size)


class _Phase(enum.Enum):
    READY = "ready"
    WAITING = "waiting"
    AWAITING_HEAD = "awaiting_head"
    BODY = "body"
    AWAITING_PROBLEM = "awaiting_problem"
    COMPLETE = "complete"


class DownloadSession:
    """One download of one object, from the first request to the last byte.

    ``offset`` (bytes already saved), ``etag``, ``size`` and ``ticket`` come from a saved
    :class:`DownloadState` when resuming; ``window`` holds ``not_before``/``not_after``;
    ``wait_limit`` is the most seconds to spend waiting for the server (``None``: no
    limit). ``path`` is only reported in :class:`Completed`.

    Methods must be called in protocol order; a call out of order raises
    ``RuntimeError`` and changes nothing. Once a method raises an
    :class:`ArkvoryClientError`, the download is over and the session is dropped.
    """

    def __init__(
        self,
        url: str,
        *,
        path: Path,
        download_id: str,
        rng: RandomSource,
        policy: RetryPolicy | None = None,
        download_class: str | None = None,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        offset: int = 0,
        etag: str | None = None,
        size: int | None = None,
        ticket: str | None = None,
        window: Window | None = None,
        wait_limit: float | None = None,
    ) -> None:
        if chunk_size < 1:
            raise ValueError("chunk_size must be at least 1 byte")
        if wait_limit is not None and (math.isnan(wait_limit) or wait_limit < 0):
            raise ValueError("wait_limit must be a number of seconds, at least 0")
        if offset < 0 or (size is not None and offset > size):
            raise ValueError("offset must be between 0 and size")
        DownloadState(download_id=download_id)  # validates the id
        self.url = url
        self.path = path
        self.download_id = download_id
        self.download_class = download_class
        self.chunk_size = chunk_size
        self.window = window or Window()
        self.wait_limit = wait_limit
        self.policy = policy or RetryPolicy()
        self._rng = rng
        self._offset = offset
        self._etag = etag if offset > 0 else None
        self._size = size
        self._ticket = ticket
        self._phase = _Phase.READY
        self._events: list[Event] = []
        self._waited = 0.0
        # Set when a wait was cut at the limit or the deadline: after it, the limit is
        # reached whatever rounding of the measured time says.
        self._limit_reached = False
        self._deadline_reached = False
        self._wait_plan: tuple[float, str] | None = None
        self._wait_reason = ""
        self._wait_started: tuple[float, float] = (0.0, 0.0)
        self._window_checked = False
        self._request: Request | None = None
        self._sent_if_range = False
        self._head: dict[str, str] = {}
        self._status = 0
        self._body_expected: int | None = None
        self._body_received = 0
        self._transferring = False
        self._last_start: StartsAt | None = None
        self._last_progress = 0.0
        self._rate_samples: deque[tuple[float, int]] = deque()

    # ------------------------------------------------------------------ reading
    @property
    def done(self) -> int:
        """Bytes saved so far (the next request starts here)."""
        return self._offset

    @property
    def size(self) -> int | None:
        """The object's size, once a response told it."""
        return self._size

    @property
    def etag(self) -> str | None:
        """The version being downloaded, once a response told it."""
        return self._etag

    @property
    def waited(self) -> float:
        """Seconds spent waiting for the server so far (counted against ``wait_limit``)."""
        return self._waited

    @property
    def is_complete(self) -> bool:
        return self._phase is _Phase.COMPLETE

    @property
    def state(self) -> DownloadState:
        """What a checkpoint needs to continue this download elsewhere."""
        return DownloadState(
            download_id=self.download_id,
            etag=self._etag,
            size=self._size,
            done=self._offset,
            ticket=self._ticket,
        )

    def pop_events(self) -> list[Event]:
        """The events produced since the last call, oldest first."""
        events, self._events = self._events, []
        return events

    # ------------------------------------------------------------------ stepping
    def next_step(self, now_wall: float, now_mono: float) -> Step:
        """The next thing to do: a :class:`Request`, a :class:`Wait` or :data:`FINISHED`.

        Raises :class:`QueueDeadlineError` when ``not_after`` has passed before the first
        request.
        """
        self._expect(_Phase.READY, _Phase.COMPLETE)
        if self._phase is _Phase.COMPLETE:
            return FINISHED
        if not self._window_checked:
            self._window_checked = True  # the window is waited for once, before asking
            not_before = self.window.not_before
            if not_before is not None and now_wall < not_before.timestamp():
                self._wait_plan = (not_before.timestamp() - now_wall, "not_before")
        if self._wait_plan is not None:
            seconds, reason = self._wait_plan
            self._wait_plan = None
            self._wait_reason = reason
            self._phase = _Phase.WAITING
            self._wait_started = (now_wall, now_mono)
            self._rate_samples.clear()
            return Wait(now_wall + seconds, seconds, reason)
        if self._request is None:
            not_after = self.window.not_after
            if not_after is not None and now_wall >= not_after.timestamp():
                raise QueueDeadlineError(
                    f"not_after ({not_after.isoformat()}) passed before the download started",
                    not_after=not_after,
                    starts_at=None,
                )
        if self._size is not None and self._offset >= self._size:
            self._phase = _Phase.COMPLETE
            return FINISHED
        self._request = self._build_request()
        self._body_received = 0
        self._phase = _Phase.AWAITING_HEAD
        return self._request

    def wait_over(self, now_wall: float, now_mono: float) -> None:
        """The :class:`Wait` returned by :meth:`next_step` has been slept."""
        self._expect(_Phase.WAITING)
        started_wall, started_mono = self._wait_started
        self._phase = _Phase.READY
        if self._wait_reason != "not_before":
            # Wall time counts a suspended laptop; monotonic time a clock set back.
            self._waited += max(now_wall - started_wall, now_mono - started_mono, 0.0)

    def _build_request(self) -> Request:
        first = self._offset
        last = first + self.chunk_size - 1
        if self._size is not None:
            last = min(last, self._size - 1)
        headers = [
            ("Range", f"bytes={first}-{last}"),
            ("Accept-Encoding", "identity"),
            (DOWNLOAD_ID_HEADER, self.download_id),
        ]
        self._sent_if_range = first > 0 and _is_strong(self._etag)
        if self._sent_if_range:
            assert self._etag is not None
            headers.append(("If-Range", self._etag))
        if self._ticket is not None:
            headers.append((TICKET_HEADER, self._ticket))
        if self.download_class is not None:
            headers.append((DOWNLOAD_CLASS_HEADER, self.download_class))
        return Request("GET", self.url, tuple(headers), first)

    # ------------------------------------------------------------------ responses
    def response_head(
        self, status: int, headers: Mapping[str, str], now_mono: float
    ) -> BodyPlan | ReadProblem:
        """The status line and headers of the answer to the last :class:`Request`.

        Returns a :class:`BodyPlan` for a body to save (``200``/``206``), else
        :data:`READ_PROBLEM`. Raises :class:`ObjectChangedError` or
        :class:`InvalidResponseError` before any byte is to be written.
        """
        self._expect(_Phase.AWAITING_HEAD)
        head = {name.lower(): value for name, value in headers.items()}
        ticket = head.get("arkvory-queue-ticket")
        if ticket and len(ticket) <= _MAX_TICKET and ticket.isascii() and ticket.isprintable():
            self._ticket = ticket.strip()
        self._head = head
        self._status = status
        self._body_received = 0
        encoding = head.get("content-encoding", "identity").strip().lower()
        if status in (200, 206) and encoding not in ("", "identity"):
            # Ranges count bytes of the encoded form: saving decoded bytes would corrupt.
            raise InvalidResponseError(f"a body in Content-Encoding {encoding!r} was not asked for")
        if status == 206:
            plan = self._partial(head)
        elif status == 200:
            plan = self._whole(head)
        else:
            self._phase = _Phase.AWAITING_PROBLEM
            return READ_PROBLEM
        self._phase = _Phase.BODY
        self._body_expected = plan.length
        self._rate_samples.append((now_mono, self._offset))
        self._last_progress = now_mono
        if not self._transferring:
            self._transferring = True
            self._events.append(Started(self._offset, self._size))
        return plan

    def _partial(self, head: dict[str, str]) -> BodyPlan:
        if "multipart/" in head.get("content-type", "").lower():
            raise InvalidResponseError("a multipart answer to a single range")
        parsed = parse_content_range(head.get("content-range"))
        if parsed is None or parsed.first is None or parsed.last is None:
            raise InvalidResponseError("206 without a usable Content-Range")
        if parsed.size is None:
            raise InvalidResponseError("206 without the object's size in Content-Range")
        self._check_version(head.get("etag"), parsed.size)
        if parsed.first != self._offset or parsed.last >= parsed.size:
            raise InvalidResponseError(
                f"asked for bytes from {self._offset}, got Content-Range "
                f"{head.get('content-range')!r}"
            )
        length = parsed.last - parsed.first + 1
        declared = _content_length(head)
        if declared is not None and declared != length:
            raise InvalidResponseError(f"Content-Length {declared} disagrees with Content-Range")
        self._adopt(head.get("etag"), parsed.size)
        return BodyPlan(offset=self._offset, length=length, truncate=False)

    def _whole(self, head: dict[str, str]) -> BodyPlan:
        etag = head.get("etag")
        length = _content_length(head)
        if self._offset > 0:
            known = etag is not None and self._etag is not None
            if etag != self._etag and (self._sent_if_range or known):
                raise ObjectChangedError(
                    f"the object changed after {self._offset} bytes were saved "
                    f"(ETag {self._etag} → {etag})",
                    old_etag=self._etag,
                    new_etag=etag,
                )
            # Same version, but the server ignored Range: take it whole from zero.
            self._offset = 0
            self._transferring = False
        self._etag = etag
        self._size = length
        return BodyPlan(offset=0, length=length, truncate=True)

    def _check_version(self, etag: str | None, size: int) -> None:
        """Once bytes are saved, every answer must be of the same version (R-CLIENT-8)."""
        if self._offset == 0:
            return
        if self._etag is not None and etag is None:
            raise InvalidResponseError("the ETag disappeared between ranges")
        if self._etag is not None and etag != self._etag:
            raise ObjectChangedError(
                f"the object changed after {self._offset} bytes were saved "
                f"(ETag {self._etag} → {etag})",
                old_etag=self._etag,
                new_etag=etag,
            )
        if self._size is not None and size != self._size:
            raise ObjectChangedError(
                f"the object's size changed from {self._size} to {size} mid-download",
                old_etag=self._etag,
                new_etag=etag,
            )

    def _adopt(self, etag: str | None, size: int) -> None:
        if etag is not None:
            self._etag = etag
        self._size = size

    def response_data(self, nbytes: int, now_mono: float) -> None:
        """``nbytes`` more body bytes arrived; call *before* writing them.

        Raises :class:`InvalidResponseError` if they overrun the announced length.
        """
        self._expect(_Phase.BODY)
        if self._body_expected is not None and self._body_received + nbytes > self._body_expected:
            raise InvalidResponseError(
                f"the server sent more than the {self._body_expected} bytes it announced"
            )
        self._body_received += nbytes
        self._offset += nbytes
        if now_mono - self._last_progress >= PROGRESS_INTERVAL:
            self._progress(now_mono)

    def response_end(self, now_mono: float) -> None:
        """The body ended normally; a short body is a real failure (``truncated_body``)."""
        self._expect(_Phase.BODY)
        self._phase = _Phase.READY
        if self._body_received > 0:
            self._progress(now_mono)
        expected = self._body_expected
        if expected is not None and self._body_received < expected:
            self._failed(Failure("truncated_body", self._status, self._request_offset()))
            return
        self.policy = self.policy.next_request()
        if self._size is None:
            self._size = self._offset  # a whole body of unannounced length is complete
        if self._offset >= self._size:
            self._phase = _Phase.COMPLETE

    def transport_failed(self, failure: Failure, now_mono: float) -> None:
        """The exchange broke (no answer, or the body stopped): a real failure.

        Bytes received before the break stay saved and count as progress.
        """
        self._expect(_Phase.AWAITING_HEAD, _Phase.BODY, _Phase.AWAITING_PROBLEM)
        if self._phase is _Phase.BODY and self._body_received > 0:
            self._progress(now_mono)
        self._phase = _Phase.READY
        self._failed(failure)

    def response_problem(self, body: bytes, now_wall: float) -> None:
        """The (start of the) body of an answer that carried no bytes to save.

        Plans a busy wait or a back-off, completes on a ``416`` at the end of the object,
        or raises: :class:`HTTPStatusError`, :class:`QueueDeadlineError`,
        :class:`WaitLimitError`, :class:`RetriesExhaustedError`,
        :class:`InvalidResponseError`, :class:`ObjectChangedError`.
        """
        self._expect(_Phase.AWAITING_PROBLEM)
        self._phase = _Phase.READY
        status, head = self._status, self._head
        problem = _parse_problem(head, body)
        if status == 416:
            self._unsatisfiable(head)
            return
        action = classify(status, head, now_wall=now_wall, problem=problem)
        if isinstance(action, BusyWait):
            self._busy(action, head, now_wall)
        elif isinstance(action, Retry):
            self._failed(Failure(action.reason, status, self._request_offset()))
        elif isinstance(action, Fail):
            raise HTTPStatusError(_status_message(status, problem), status=status, problem=problem)
        else:
            assert isinstance(action, Done)
            raise InvalidResponseError(f"unexpected status {status} to a range request")

    def _unsatisfiable(self, head: dict[str, str]) -> None:
        parsed = parse_content_range(head.get("content-range"))
        size = parsed.size if parsed is not None and parsed.first is None else None
        if size is None:
            size = self._size
        if size is None:
            raise InvalidResponseError("416 without the object's size")
        if size == self._offset:
            self._check_version(head.get("etag"), size)
            self._adopt(head.get("etag"), size)
            self._phase = _Phase.COMPLETE
            return
        if self._offset > size or (self._size is not None and size != self._size):
            raise ObjectChangedError(
                f"the object is {size} bytes now; {self._offset} were saved",
                old_etag=self._etag,
                new_etag=head.get("etag"),
            )
        raise InvalidResponseError(f"416 for a range inside the object's {size} bytes")

    # ------------------------------------------------------------------ waiting
    def _busy(self, action: BusyWait, head: dict[str, str], now_wall: float) -> None:
        """Come back later: report the queue, enforce ``not_after``, plan the wait."""
        starts = parse_starts_at(head.get("arkvory-starts-at"))
        if starts is not None:
            self._last_start = starts
        self._transferring = False
        seconds = self.policy.busy_delay(action.seconds, self._rng)
        not_after = self.window.not_after
        left: float | None = None
        if not_after is not None:
            last = self._last_start.point if self._last_start is not None else None
            if starts is not None and starts.point > not_after:
                raise QueueDeadlineError(
                    f"the server expects to start at {starts.point.isoformat()}, "
                    f"after not_after ({not_after.isoformat()})",
                    not_after=not_after,
                    starts_at=starts.point,
                )
            left = not_after.timestamp() - now_wall
            if left <= 0 or self._deadline_reached:
                raise QueueDeadlineError(
                    f"not_after ({not_after.isoformat()}) passed while queued",
                    not_after=not_after,
                    starts_at=last,
                )
        self._plan_wait(
            seconds, "busy", deadline_left=left
        )  # may raise: then no event, the error says it
        self._events.append(
            Queued(
                position=parse_queue_position(head.get("arkvory-queue-position")),
                starts_at=starts.point if starts else None,
                earliest=starts.earliest if starts else None,
                latest=starts.latest if starts else None,
                retry_after=action.seconds,
                download_class=head.get("arkvory-download-class"),
                reason=action.reason,
            )
        )

    def _failed(self, failure: Failure) -> None:
        """Spend budget for a real failure (raises when spent) and plan the back-off."""
        progressed = self._body_received > 0
        policy = self.policy.next_request() if progressed else self.policy
        policy = policy.increment(failure)
        delay = policy.backoff(self._rng)
        self._events.append(Retrying(failure.reason, policy.request_failures, delay))
        self.policy = policy.next_request() if progressed else policy
        self._body_received = 0
        self._plan_wait(delay, "backoff")

    def _plan_wait(
        self, seconds: float, reason: str, *, deadline_left: float | None = None
    ) -> None:
        """Plan a wait of ``seconds``, cut at the wait limit and at ``not_after``."""
        limit_left: float | None = None
        if self.wait_limit is not None:
            limit_left = self.wait_limit - self._waited
            if limit_left <= 0 or self._limit_reached:
                raise WaitLimitError(
                    f"waited {self._waited:.0f} s for the server; wait_limit is "
                    f"{self.wait_limit:.0f} s",
                    waited=self._waited,
                    wait_limit=self.wait_limit,
                )
            seconds = min(seconds, limit_left)
        if deadline_left is not None:
            seconds = min(seconds, deadline_left)
            self._deadline_reached = seconds >= deadline_left
        self._limit_reached = limit_left is not None and seconds >= limit_left
        self._wait_plan = (seconds, reason)

    # ------------------------------------------------------------------ the end
    def complete(self) -> DownloadResult:
        """Call once the file is committed at ``path``: emits :class:`Completed`."""
        self._expect(_Phase.COMPLETE)
        size = self._size if self._size is not None else self._offset
        self._events.append(Completed(size=size, path=self.path, etag=self._etag))
        return DownloadResult(
            path=self.path,
            size=size,
            etag=self._etag,
            download_id=self.download_id,
            failures=self.policy.failures,
            waited=self._waited,
        )

    # ------------------------------------------------------------------ helpers
    def _progress(self, now_mono: float) -> None:
        samples = self._rate_samples
        samples.append((now_mono, self._offset))
        while len(samples) > 2 and now_mono - samples[1][0] >= _RATE_WINDOW:
            samples.popleft()
        oldest_time, oldest_done = samples[0]
        elapsed = now_mono - oldest_time
        rate = (self._offset - oldest_done) / elapsed if elapsed > 0 else 0.0
        self._last_progress = now_mono
        self._events.append(Progress(self._offset, self._size, max(rate, 0.0)))

    def _request_offset(self) -> int:
        return self._request.offset if self._request is not None else self._offset

    def _expect(self, *phases: _Phase) -> None:
        if self._phase not in phases:
            wanted = " or ".join(p.value for p in phases)
            raise RuntimeError(f"download session is {self._phase.value}, expected {wanted}")


def _is_strong(etag: str | None) -> bool:
    """A weak tag never matches ``If-Range`` (RFC 9110 §13.1.5): only strong ones go out."""
    return etag is not None and etag.startswith('"')


def _content_length(head: Mapping[str, str]) -> int | None:
    value = head.get("content-length")
    if value is None or not _CONTENT_LENGTH.fullmatch(value.strip()):
        return None
    return int(value.strip())


def _parse_problem(head: Mapping[str, str], body: bytes) -> dict[str, Any] | None:
    """The RFC 9457 problem document of an error body, if it is one."""
    content_type = head.get("content-type", "").split(";", 1)[0].strip().lower()
    if not (content_type == "application/problem+json" or content_type.endswith("/json")):
        return None
    try:
        document = json.loads(body[:PROBLEM_BODY_LIMIT])
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return document if isinstance(document, dict) else None


def _status_message(status: int, problem: Mapping[str, Any] | None) -> str:
    if problem is None:
        return f"the server answered {status}"
    parts = [str(problem.get(key)) for key in ("title", "detail") if problem.get(key)]
    if not parts:
        return f"the server answered {status}"
    return f"the server answered {status}: " + " — ".join(parts)
