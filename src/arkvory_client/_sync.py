"""The blocking client: drives a :class:`DownloadSession` with an ``httpx.Client``.

All decisions are the session's; this file only sends, streams, writes and sleeps.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator, Mapping
from datetime import timedelta, tzinfo
from types import TracebackType
from typing import Self

import httpx

from ._clock import CancelCheck, Clock, Sleeper, SystemClock, sleep_until_wall_sync
from ._driver import (
    DEFAULT_TIMEOUT,
    HTTP_ERRORS,
    EventCallback,
    Outcome,
    Run,
    Setup,
    StateCallback,
    build_request,
    prepare,
    translate_error,
)
from ._events import DownloadResult, DownloadState, Event
from ._exceptions import DownloadCancelledError, ObjectChangedError
from ._policy import RandomSource, RetryPolicy
from ._steps import DEFAULT_CHUNK_SIZE, PROBLEM_BODY_LIMIT, Finished, ReadProblem, Request, Wait
from ._windows import TimeSpec

__all__ = ["Client"]


class Client:
    """Download objects from an Arkvory server, waiting out its queue (blocking).

    ``http`` is the ``httpx.Client`` to use (the caller keeps owning it); without it the
    client makes its own from ``transport``, ``headers`` (credentials) and ``timeout``,
    following redirects. ``policy`` bounds real failures; busy answers never spend it.
    ``clock``, ``sleep`` and ``rng`` are injectable so tests run hours of queueing in
    milliseconds; ``tz`` is the time zone of ``HH:MM`` windows (default: local).

    Use as a context manager, or call :meth:`close`.
    """

    def __init__(
        self,
        *,
        http: httpx.Client | None = None,
        transport: httpx.BaseTransport | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
        policy: RetryPolicy | None = None,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        clock: Clock | None = None,
        sleep: Sleeper = time.sleep,
        rng: RandomSource | None = None,
        tz: tzinfo | None = None,
    ) -> None:
        if http is not None and (transport is not None or headers is not None):
            raise ValueError("pass either http or transport/headers, not both")
        if chunk_size < 1:
            raise ValueError("chunk_size must be at least 1 byte")
        self._owns_http = http is None
        self._http = http or httpx.Client(
            transport=transport, headers=headers, timeout=timeout, follow_redirects=True
        )
        self.policy = policy or RetryPolicy()
        self.chunk_size = chunk_size
        self._clock = clock or SystemClock()
        self._sleep = sleep
        self._rng: RandomSource = rng or random.Random()
        self._tz = tz

    def close(self) -> None:
        """Close the ``httpx.Client`` if this client made it."""
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def download(
        self,
        url: str,
        dest: str | os.PathLike[str],
        *,
        download_id: str | None = None,
        download_class: str | None = None,
        not_before: TimeSpec | None = None,
        not_after: TimeSpec | None = None,
        wait_limit: float | timedelta | None = None,
        on_event: EventCallback | None = None,
        on_state: StateCallback | None = None,
        state: DownloadState | None = None,
        resume: bool = True,
        cancelled: CancelCheck | None = None,
    ) -> DownloadResult:
        """Download ``url`` to ``dest`` and return what was saved.

        Waits as long as the server's queue asks (R-CLIENT-1, 2) unless ``wait_limit``
        (seconds) or ``not_after`` says otherwise; does not ask before ``not_before``.
        Times are RFC 3339, ``HH:MM`` (next occurrence) or datetimes (R-CLIENT-7).

        ``download_id`` (default: the one in ``state``, else a fresh one) is sent on
        every request; ``download_class`` asks for a lower class (``bulk``…).
        ``on_event`` receives :class:`Queued`, :class:`Started`, :class:`Progress`,
        :class:`Retrying` and finally :class:`Completed`. ``on_state`` receives each new
        :class:`DownloadState` to checkpoint; passing one back as ``state`` resumes from
        its bytes in ``dest + ".part"`` (``resume=False`` starts over, keeping the id
        and ticket). ``cancelled`` is polled between chunks and sleep steps.

        Raises a subclass of :class:`ArkvoryClientError`, ``ValueError`` for unusable
        arguments, or ``OSError`` from the file system.
        """
        setup = self._prepare(
            url, dest, download_id, download_class, not_before, not_after, wait_limit,
            on_state, state, resume,
        )  # fmt: skip
        outcome = Outcome()
        for event in self._drive(setup, cancelled, outcome):
            if on_event is not None:
                on_event(event)
        assert outcome.result is not None
        return outcome.result

    def iter_download(
        self,
        url: str,
        dest: str | os.PathLike[str],
        *,
        download_id: str | None = None,
        download_class: str | None = None,
        not_before: TimeSpec | None = None,
        not_after: TimeSpec | None = None,
        wait_limit: float | timedelta | None = None,
        on_state: StateCallback | None = None,
        state: DownloadState | None = None,
        resume: bool = True,
        cancelled: CancelCheck | None = None,
    ) -> Iterator[Event]:
        """Like :meth:`download`, as an iterator of events ending with :class:`Completed`.

        The download advances only while the iterator is consumed; closing it early
        stops the download and keeps the partial file for a resume.
        """
        setup = self._prepare(
            url, dest, download_id, download_class, not_before, not_after, wait_limit,
            on_state, state, resume,
        )  # fmt: skip
        return self._drive(setup, cancelled, Outcome())

    # ------------------------------------------------------------------ internals
    def _prepare(
        self,
        url: str,
        dest: str | os.PathLike[str],
        download_id: str | None,
        download_class: str | None,
        not_before: TimeSpec | None,
        not_after: TimeSpec | None,
        wait_limit: float | timedelta | None,
        on_state: StateCallback | None,
        state: DownloadState | None,
        resume: bool,
    ) -> Setup:
        return prepare(
            url,
            dest,
            clock=self._clock,
            rng=self._rng,
            policy=self.policy,
            chunk_size=self.chunk_size,
            tz=self._tz,
            download_id=download_id,
            download_class=download_class,
            not_before=not_before,
            not_after=not_after,
            wait_limit=wait_limit,
            state=state,
            resume=resume,
            on_state=on_state,
        )

    def _drive(
        self, setup: Setup, cancelled: CancelCheck | None, outcome: Outcome
    ) -> Iterator[Event]:
        run = setup.open()
        session, clock = run.session, self._clock
        try:
            self._checkpoint(run, force=True)
            while not isinstance(
                step := session.next_step(clock.wall(), clock.monotonic()), Finished
            ):
                if isinstance(step, Wait):
                    sleep_until_wall_sync(step.until_wall, clock, self._sleep, cancelled=cancelled)
                    session.wait_over(clock.wall(), clock.monotonic())
                else:
                    yield from self._exchange(run, step, cancelled)
                    self._checkpoint(run, force=True)
                yield from session.pop_events()
            run.file.commit()
            outcome.result = session.complete()
            yield from session.pop_events()
        except ObjectChangedError:
            run.file.discard()
            raise
        finally:
            run.file.close()

    def _exchange(self, run: Run, step: Request, cancelled: CancelCheck | None) -> Iterator[Event]:
        session, clock = run.session, self._clock
        try:
            response = self._http.send(build_request(self._http, step), stream=True)
        except HTTP_ERRORS as error:
            session.transport_failed(translate_error(error, step.offset), clock.monotonic())
            return
        try:
            plan = session.response_head(response.status_code, response.headers, clock.monotonic())
            if isinstance(plan, ReadProblem):
                body = self._read_problem(response)
                session.response_problem(body, clock.wall())
                return
            run.file.begin(plan)
            yield from session.pop_events()
            try:
                for chunk in response.iter_bytes():
                    if cancelled is not None and cancelled():
                        raise DownloadCancelledError("cancelled by the caller")
                    session.response_data(len(chunk), clock.monotonic())
                    run.file.write(chunk)
                    self._checkpoint(run, force=False)
                    yield from session.pop_events()
            except HTTP_ERRORS as error:
                session.transport_failed(translate_error(error, step.offset), clock.monotonic())
            else:
                session.response_end(clock.monotonic())
        finally:
            response.close()

    @staticmethod
    def _read_problem(response: httpx.Response) -> bytes:
        body = bytearray()
        try:
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) >= PROBLEM_BODY_LIMIT:
                    break
        except HTTP_ERRORS:
            pass  # the status and headers are the answer; a broken error body adds nothing
        return bytes(body)

    @staticmethod
    def _checkpoint(run: Run, *, force: bool) -> None:
        state = run.state_due(force=force)
        if state is not None:
            run.file.sync()
            run.checkpoints.report(state)
