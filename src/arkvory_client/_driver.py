"""What the sync and the async client share besides the session: setting a download up,
checkpoints, and the one boundary where ``httpx`` errors become this package's terms.

The two clients differ only in how they wait for I/O; everything they decide is here or
in :mod:`._session`, so they cannot drift apart.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta, tzinfo
from pathlib import Path
from typing import Final

import httpx

from ._clock import Clock
from ._events import DownloadResult, DownloadState, Event, new_download_id
from ._exceptions import InvalidRequestError, InvalidResponseError
from ._files import PartFile
from ._policy import Failure, RandomSource, RetryPolicy
from ._session import DownloadSession
from ._steps import Request
from ._windows import TimeSpec, Window, resolve_window, utc_from_timestamp

__all__ = [
    "DEFAULT_TIMEOUT",
    "HTTP_ERRORS",
    "Checkpoints",
    "EventCallback",
    "Outcome",
    "Run",
    "Setup",
    "StateCallback",
    "build_request",
    "prepare",
    "translate_error",
]

DEFAULT_TIMEOUT: Final = httpx.Timeout(60.0, connect=15.0)
"""Per attempt: a stalled read after 60 s is a real failure (R-CLIENT-3), retried."""

StateCallback = Callable[[DownloadState], object]
"""Receives each new :class:`DownloadState` to checkpoint."""
EventCallback = Callable[[Event], object]
"""Receives each :class:`Event` of a download, in order."""
_MAX_CLASS: Final = 64


class Checkpoints:
    """Reports :class:`DownloadState` to the caller when it changed, bytes first synced.

    Inside a long body a checkpoint is taken at most every ``every`` bytes, so a crash
    loses at most that much while fsync stays rare.
    """

    __slots__ = ("_callback", "_every", "_last")

    def __init__(self, callback: StateCallback | None, every: int) -> None:
        self._callback = callback
        self._every = every
        self._last: DownloadState | None = None

    @property
    def wanted(self) -> bool:
        return self._callback is not None

    def due(self, state: DownloadState, *, force: bool) -> bool:
        """Whether ``state`` should be reported now (the caller syncs the file first)."""
        if self._callback is None or state == self._last:
            return False
        last = self._last
        if force or last is None or state.done < last.done:
            return True
        return state.done - last.done >= self._every or (
            state.done == last.done  # only the ticket or ETag changed: nothing to sync
        )

    def report(self, state: DownloadState) -> None:
        assert self._callback is not None
        self._last = state
        self._callback(state)


@dataclass(slots=True)
class Run:
    """One download in progress: its session, its partial file, its checkpoints."""

    session: DownloadSession
    file: PartFile
    checkpoints: Checkpoints

    def state_due(self, *, force: bool) -> DownloadState | None:
        """The state to report now, if any; the caller syncs the file, then reports."""
        state = self.session.state
        return state if self.checkpoints.due(state, force=force) else None


@dataclass(slots=True)
class Outcome:
    """Where a driver leaves the result for ``download()`` (generators cannot return it
    to a ``for`` loop)."""

    result: DownloadResult | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Setup:
    """A download validated and planned but not started: only :meth:`open` touches the
    file system, so an iterator that is never consumed leaves nothing open."""

    url: str
    dest: Path
    download_id: str
    saved: DownloadState | None
    resume: bool
    download_class: str | None
    window: Window
    wait_limit: float | None
    policy: RetryPolicy
    rng: RandomSource
    chunk_size: int
    on_state: StateCallback | None

    def open(self) -> Run:
        """Open the ``.part`` file (cut to what may be kept) and start the session."""
        file, offset = PartFile.open(self.dest, state=self.saved, resume=self.resume)
        saved = self.saved if offset > 0 else None
        try:
            session = DownloadSession(
                self.url,
                path=self.dest,
                download_id=self.download_id,
                rng=self.rng,
                policy=self.policy,
                download_class=self.download_class,
                chunk_size=self.chunk_size,
                offset=offset,
                etag=saved.etag if saved is not None else None,
                size=saved.size if saved is not None else None,
                ticket=self.saved.ticket if self.saved is not None else None,
                window=self.window,
                wait_limit=self.wait_limit,
            )
        except BaseException:
            file.close()
            raise
        return Run(session, file, Checkpoints(self.on_state, self.chunk_size))


def prepare(
    url: str,
    dest: str | os.PathLike[str],
    *,
    clock: Clock,
    rng: RandomSource,
    policy: RetryPolicy,
    chunk_size: int,
    tz: tzinfo | None,
    download_id: str | None,
    download_class: str | None,
    not_before: TimeSpec | None,
    not_after: TimeSpec | None,
    wait_limit: float | timedelta | None,
    state: DownloadState | None,
    resume: bool,
    on_state: StateCallback | None,
) -> Setup:
    """Validate the arguments and resolve the window; raises ``ValueError`` for anything
    unusable, before a file is touched or a request sent."""
    if download_class is not None and not _is_token(download_class):
        raise ValueError("download_class must be a short printable word, such as 'bulk'")
    limit = wait_limit.total_seconds() if isinstance(wait_limit, timedelta) else wait_limit
    if limit is not None and (not math.isfinite(limit) or limit < 0):
        raise ValueError("wait_limit must be a finite number of seconds, at least 0")
    window = resolve_window(not_before, not_after, now=utc_from_timestamp(clock.wall()), tz=tz)
    saved = state
    if saved is not None and download_id is not None and download_id != saved.download_id:
        saved = None  # a state of another download: nothing of it carries over
    identity = download_id or (saved.download_id if saved is not None else new_download_id())
    DownloadState(download_id=identity)  # validates a caller's id
    return Setup(
        url=url,
        dest=Path(dest),
        download_id=identity,
        saved=saved,
        resume=resume,
        download_class=download_class,
        window=window,
        wait_limit=limit,
        policy=policy,
        rng=rng,
        chunk_size=chunk_size,
        on_state=on_state,
    )


def _is_token(value: str) -> bool:
    return 0 < len(value) <= _MAX_CLASS and value.isascii() and value.isprintable()


def build_request(client: httpx.Client | httpx.AsyncClient, request: Request) -> httpx.Request:
    """The ``httpx`` request for a session :class:`Request` (may raise ``InvalidURL``)."""
    return client.build_request(request.method, request.url, headers=list(request.headers))


def translate_error(error: Exception, offset: int) -> Failure:
    """The one boundary for ``httpx`` errors.

    Returns the :class:`Failure` to retry for a dropped connection, a timeout or a broken
    protocol exchange (R-CLIENT-3); raises :class:`InvalidRequestError` or
    :class:`InvalidResponseError` ``from`` the original when retrying cannot help.
    """
    if isinstance(error, httpx.TimeoutException):
        return Failure("timeout", None, offset, error)
    if isinstance(error, httpx.RemoteProtocolError):
        return Failure("protocol_error", None, offset, error)  # e.g. a body cut short
    if isinstance(error, httpx.NetworkError | httpx.ProxyError):
        return Failure("connection_error", None, offset, error)
    if isinstance(error, httpx.UnsupportedProtocol | httpx.LocalProtocolError | httpx.InvalidURL):
        raise InvalidRequestError(f"cannot send the request: {error}") from error
    raise InvalidResponseError(f"unusable response: {error}") from error


HTTP_ERRORS: Final = (httpx.HTTPError, httpx.InvalidURL)
"""What :func:`translate_error` accepts; every ``httpx`` call of the clients catches it."""
