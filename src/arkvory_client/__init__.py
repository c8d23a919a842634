"""arkvory-client: download from an Arkvory server without ever giving up because it is busy.

The server queues large downloads as whole sessions and answers a waiting client ``503``
with ``Retry-After``, its place and an estimated start. This SDK waits those answers out
without spending its retry budget (SPEC §2, R-CLIENT-1..9), downloads in ranges that
resume from a saved prefix and never mix two versions of an object, and reports queue
position, estimated start and progress as events::

    from arkvory_client import Client, Queued

    with Client(headers={"Authorization": "Bearer …"}) as client:
        result = client.download(url, "image.tar", wait_limit=3600, on_event=print)

:class:`AsyncClient` is the same for ``async`` code. The public surface is this
namespace; modules starting with ``_`` are private.
"""

from __future__ import annotations

from ._async import AsyncClient
from ._clock import (
    CANCEL_CHECK_STEP,
    MAX_SLEEP_STEP,
    AsyncSleeper,
    CancelCheck,
    Clock,
    Sleeper,
    SystemClock,
    sleep_until_wall,
    sleep_until_wall_sync,
)
from ._driver import DEFAULT_TIMEOUT, EventCallback, StateCallback
from ._events import (
    Completed,
    DownloadResult,
    DownloadState,
    Event,
    Progress,
    Queued,
    Retrying,
    Started,
    new_download_id,
)
from ._exceptions import (
    ArkvoryClientError,
    DownloadCancelledError,
    HTTPStatusError,
    InvalidRequestError,
    InvalidResponseError,
    ObjectChangedError,
    QueueDeadlineError,
    RetriesExhaustedError,
    WaitLimitError,
)
from ._files import PART_SUFFIX, part_path
from ._policy import (
    DEFAULT_BACKOFF_BASE,
    DEFAULT_BUSY_JITTER,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_DELAY,
    DEFAULT_MAX_RETRIES,
    Action,
    BusyWait,
    Done,
    Fail,
    Failure,
    RandomSource,
    Retry,
    RetryPolicy,
    classify,
)
from ._retry_after import (
    MAX_RETRY_AFTER,
    StartsAt,
    parse_queue_position,
    parse_retry_after,
    parse_starts_at,
)
from ._steps import DEFAULT_CHUNK_SIZE
from ._sync import Client
from ._windows import TimeSpec, Window, parse_time, resolve_window

__all__ = [
    "CANCEL_CHECK_STEP",
    "DEFAULT_BACKOFF_BASE",
    "DEFAULT_BUSY_JITTER",
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_MAX_DELAY",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_TIMEOUT",
    "MAX_RETRY_AFTER",
    "MAX_SLEEP_STEP",
    "PART_SUFFIX",
    "Action",
    "ArkvoryClientError",
    "AsyncClient",
    "AsyncSleeper",
    "BusyWait",
    "CancelCheck",
    "Client",
    "Clock",
    "Completed",
    "Done",
    "DownloadCancelledError",
    "DownloadResult",
    "DownloadState",
    "Event",
    "EventCallback",
    "Fail",
    "Failure",
    "HTTPStatusError",
    "InvalidRequestError",
    "InvalidResponseError",
    "ObjectChangedError",
    "Progress",
    "QueueDeadlineError",
    "Queued",
    "RandomSource",
    "RetriesExhaustedError",
    "Retry",
    "RetryPolicy",
    "Retrying",
    "Sleeper",
    "Started",
    "StartsAt",
    "StateCallback",
    "SystemClock",
    "TimeSpec",
    "WaitLimitError",
    "Window",
    "classify",
    "new_download_id",
    "parse_queue_position",
    "parse_retry_after",
    "parse_starts_at",
    "parse_time",
    "part_path",
    "resolve_window",
    "sleep_until_wall",
    "sleep_until_wall_sync",
]
