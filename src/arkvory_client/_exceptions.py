"""Exceptions of ``arkvory_client``.

The whole tree::

    ArkvoryClientError            root of everything this package raises
    ├── QueueDeadlineError        ``not_after`` passed while queued, or the announced start
    │                             (``Arkvory-Starts-At``) is later than it (``starts_at``)
    ├── WaitLimitError            the caller's ``wait_limit`` was used up by waiting
    ├── RetriesExhaustedError     real failures spent the retry budget (``history``)
    ├── ObjectChangedError        the object changed mid-download: restart from zero
    ├── HTTPStatusError           a status that retrying cannot fix (``status``, ``problem``)
    ├── InvalidResponseError      a response that breaks the range protocol
    ├── InvalidRequestError       the request cannot be sent as given (bad URL or scheme)
    └── DownloadCancelledError    the caller's cancellation check said stop

Being busy is never an error (R-CLIENT-1): ``503``/``429`` with ``Retry-After`` are waited
out and only ``wait_limit``, ``not_after`` or cancellation end such a wait. Errors of
``httpx`` are translated in one place (``_transport.py``) with ``raise … from exc`` so the
original stays reachable as ``__cause__``. File-system errors (a full disk, a missing
directory) are not translated: they are the caller's ``OSError``.

After every error except :class:`ObjectChangedError`, the partial file and the last
:class:`~arkvory_client.DownloadState` reported stay valid for a resume.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._policy import Failure

__all__ = [
    "ArkvoryClientError",
    "DownloadCancelledError",
    "HTTPStatusError",
    "InvalidRequestError",
    "InvalidResponseError",
    "ObjectChangedError",
    "QueueDeadlineError",
    "RetriesExhaustedError",
    "WaitLimitError",
]


class ArkvoryClientError(Exception):
    """Root of every exception raised by arkvory_client."""


class QueueDeadlineError(ArkvoryClientError):
    """The download would not start before ``not_after`` (R-CLIENT-7).

    Raised instead of waiting in vain: either the server announced a start
    (``starts_at``) later than ``not_after``, or ``not_after`` passed while the download
    was still queued (``starts_at`` is then the last announced start, or ``None``). The
    ``arkvoryctl`` CLI maps it to its ``queue_deadline`` exit code.
    """

    def __init__(self, message: str, *, not_after: datetime, starts_at: datetime | None) -> None:
        super().__init__(message)
        self.not_after = not_after
        self.starts_at = starts_at


class WaitLimitError(ArkvoryClientError):
    """Waiting for the server (queue, busy answers, back-off) took longer than ``wait_limit``.

    ``waited`` is the time spent waiting, in seconds; ``wait_limit`` the caller's limit.
    """

    def __init__(self, message: str, *, waited: float, wait_limit: float) -> None:
        super().__init__(message)
        self.waited = waited
        self.wait_limit = wait_limit


class RetriesExhaustedError(ArkvoryClientError):
    """Real failures (connection drop, ``502``/``504``, timeout, truncated body) spent the
    budget: ``max_attempts`` for one request or ``max_retries`` for the operation.

    ``history`` holds every failure, oldest first; the last one is why it stopped. Busy
    answers never appear in it (R-CLIENT-1).
    """

    def __init__(self, message: str, *, history: tuple[Failure, ...]) -> None:
        super().__init__(message)
        self.history = history


class ObjectChangedError(ArkvoryClientError):
    """The object on the server is not the one whose bytes were already saved.

    Raised when the ``ETag`` or the size changes between ranges, or when an ``If-Range``
    request is answered ``200`` with another version. No byte of the new version is
    written next to the old ones (R-CLIENT-8); the partial file is discarded, so the
    caller restarts the download from zero (a saved state must drop its ``etag``).
    """

    def __init__(self, message: str, *, old_etag: str | None, new_etag: str | None) -> None:
        super().__init__(message)
        self.old_etag = old_etag
        self.new_etag = new_etag


class HTTPStatusError(ArkvoryClientError):
    """A status that retrying would not change (``404``, ``403``, ``400``, ``500`` …).

    ``problem`` is the parsed RFC 9457 problem document when the body was one (the
    server names the offending field there), else ``None``.
    """

    def __init__(
        self, message: str, *, status: int, problem: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.problem = dict(problem) if problem is not None else None


class InvalidResponseError(ArkvoryClientError):
    """A response that breaks the range protocol: a ``206`` without ``Content-Range``, a
    range other than the one asked for, more bytes than announced, a missing ``ETag``
    after one was given. Retrying the same server would get the same answer."""


class InvalidRequestError(ArkvoryClientError, ValueError):
    """The request cannot be sent as given: a malformed URL or an unsupported scheme."""


class DownloadCancelledError(ArkvoryClientError):
    """The caller's ``cancelled`` check returned true; the partial file stays for resume."""
