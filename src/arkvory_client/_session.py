"""The download as a sans-IO state machine, shared by the sync and the async client.

Rules of this file: no socket, no file, no clock, no sleep. The machine is told the time
(``now_wall``, ``now_mono``) and what happened; it answers with the next thing to do
(:mod:`._steps`) — a :class:`Request` to send, a :class:`Wait` to sleep, a
:class:`BodyPlan` for where a response body goes, or :data:`FINISHED`. All protocol
decisions are taken here, once, by rules that each live in a pure module of their own:

* every request carries ``Range`` (``chunk_size`` bytes, 8 MiB by default), the
  ``Arkvory-Download-Id``, the last queue ticket and the optional class (R-CLIENT-6;
  :mod:`._request_headers`);
* once bytes are saved, the object's ``ETag`` guards every later range: it goes out as
  ``If-Range`` and must come back unchanged, as must the size. Otherwise
  :class:`ObjectChangedError` is raised *before* a byte of the other version is handed
  out for writing, so a file never mixes two versions (R-CLIENT-8; :mod:`._range_answers`);
* busy answers become waits that spend nothing; real failures spend the
  :class:`RetryPolicy` budget and back off (R-CLIENT-1..3; :mod:`._policy`);
* ``not_after`` and ``wait_limit`` bound the waiting, not the transfer (R-CLIENT-2, 7;
  :mod:`._wait_budget`).

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
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Final

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
from ._exceptions import HTTPStatusError, InvalidResponseError
from ._policy import BusyWait, Done, Fail, Failure, RandomSource, Retry, RetryPolicy, classify
from ._problem_documents import parse_problem, status_message
from ._range_answers import (
    Saved,
    check_whole_version,
    content_length,
    partial_length,
    unsatisfiable_size,
)
from ._request_headers import accepted_ticket, range_request
from ._retry_after import StartsAt, parse_queue_position, parse_starts_at
from ._steps import (
    DEFAULT_CHUNK_SIZE,
    FINISHED,
    READ_PROBLEM,
    BodyPlan,
    ReadProblem,
    Request,
    Step,
)
from ._transfer_rate import TransferRate
from ._wait_budget import WaitBudget, check_not_too_late
from ._windows import Window

__all__ = ["DownloadSession"]

PROGRESS_INTERVAL: Final = 0.5
"""Seconds between ``Progress`` events inside one response (one more at its end)."""


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
        self.policy = policy or RetryPolicy()
        self._rng = rng
        self._offset = offset
        self._etag = etag if offset > 0 else None
        self._size = size
        self._ticket = ticket
        self._phase = _Phase.READY
        self._events: list[Event] = []
        self._budget = WaitBudget(wait_limit)
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
        self._rate = TransferRate()

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
    def wait_limit(self) -> float | None:
        """The most seconds to spend waiting for the server (``None``: no limit)."""
        return self._budget.limit

    @property
    def waited(self) -> float:
        """Seconds spent waiting for the server so far (counted against ``wait_limit``)."""
        return self._budget.waited

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
                self._budget.plan_not_before(not_before.timestamp() - now_wall)
        if self._budget.planned:
            self._phase = _Phase.WAITING
            self._rate.clear()
            return self._budget.begin(now_wall, now_mono)
        if self._request is None and self.window.not_after is not None:
            check_not_too_late(self.window.not_after, now_wall)
        if self._size is not None and self._offset >= self._size:
            self._phase = _Phase.COMPLETE
            return FINISHED
        self._request = range_request(
            self.url,
            self._saved(),
            chunk_size=self.chunk_size,
            download_id=self.download_id,
            ticket=self._ticket,
            download_class=self.download_class,
        )
        self._sent_if_range = any(name == "If-Range" for name, _ in self._request.headers)
        self._body_received = 0
        self._phase = _Phase.AWAITING_HEAD
        return self._request

    def wait_over(self, now_wall: float, now_mono: float) -> None:
        """The :class:`Wait` returned by :meth:`next_step` has been slept."""
        self._expect(_Phase.WAITING)
        self._phase = _Phase.READY
        self._budget.end(now_wall, now_mono)

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
        ticket = accepted_ticket(head.get("arkvory-queue-ticket"))
        if ticket is not None:
            self._ticket = ticket
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
        self._rate.start(now_mono, self._offset)
        self._last_progress = now_mono
        if not self._transferring:
            self._transferring = True
            self._events.append(Started(self._offset, self._size))
        return plan

    def _partial(self, head: dict[str, str]) -> BodyPlan:
        length, size = partial_length(head, self._saved())
        self._adopt(head.get("etag"), size)
        return BodyPlan(offset=self._offset, length=length, truncate=False)

    def _whole(self, head: dict[str, str]) -> BodyPlan:
        etag = head.get("etag")
        length = content_length(head)
        if self._offset > 0:
            check_whole_version(etag, self._saved(), sent_if_range=self._sent_if_range)
            # Same version, but the server ignored Range: take it whole from zero.
            self._offset = 0
            self._transferring = False
        self._etag = etag
        self._size = length
        return BodyPlan(offset=0, length=length, truncate=True)

    def _saved(self) -> Saved:
        return Saved(self._offset, self._etag, self._size)

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
        problem = parse_problem(head, body)
        if status == 416:
            self._unsatisfiable(head)
            return
        action = classify(status, head, now_wall=now_wall, problem=problem)
        if isinstance(action, BusyWait):
            self._busy(action, head, now_wall)
        elif isinstance(action, Retry):
            self._failed(Failure(action.reason, status, self._request_offset()))
        elif isinstance(action, Fail):
            raise HTTPStatusError(status_message(status, problem), status=status, problem=problem)
        else:
            assert isinstance(action, Done)
            raise InvalidResponseError(f"unexpected status {status} to a range request")

    def _unsatisfiable(self, head: dict[str, str]) -> None:
        """A ``416`` completes the download only when the saved bytes are all of it."""
        size = unsatisfiable_size(head, self._saved())
        self._adopt(head.get("etag"), size)
        self._phase = _Phase.COMPLETE

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
            left = self._budget.deadline_left(not_after, starts, self._last_start, now_wall)
        # May raise: then no event, the error says it.
        self._budget.plan(seconds, "busy", deadline_left=left)
        self._events.append(
            Queued(
                position=parse_queue_position(head.get("arkvory-queue-position")),
                starts_at=starts.point if starts else None,
                earliest=starts.earliest if starts else None,
                latest=starts.latest if starts else None,
                retry_after=action.seconds,
                download_class=head.get("arkvory-download-class"),
                reason=action.reason,
                guessed=starts.guessed if starts else False,
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
        self._budget.plan(delay, "backoff")

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
            waited=self._budget.waited,
        )

    # ------------------------------------------------------------------ helpers
    def _progress(self, now_mono: float) -> None:
        rate = self._rate.measure(now_mono, self._offset)
        self._last_progress = now_mono
        self._events.append(Progress(self._offset, self._size, rate))

    def _request_offset(self) -> int:
        return self._request.offset if self._request is not None else self._offset

    def _expect(self, *phases: _Phase) -> None:
        if self._phase not in phases:
            wanted = " or ".join(p.value for p in phases)
            raise RuntimeError(f"download session is {self._phase.value}, expected {wanted}")
