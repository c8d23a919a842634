"""The body of ``arkvoryctl download``: run the download, then turn its end into an exit code.

A checkpoint next to the file lets the same command continue after Ctrl-C, a crash or a
reboot in the same place in the queue; it is removed once the file is complete, kept on
an interrupt, and removed with an empty ``.part`` when the download fails for good
before a byte was saved, so a failed command leaves nothing behind to confuse the next.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Mapping
from datetime import UTC, datetime, tzinfo

from ._checkpoint import CheckpointError, read_checkpoint, remove_checkpoint
from ._cli_interrupt import Interrupt
from ._cli_job import Job
from ._cli_parser import EXIT_DEADLINE, EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from ._clock import Clock
from ._events import DownloadState
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
from ._files import part_path
from ._render import PROG, Display, clock_time, json_time
from ._sync import Client

__all__ = ["run_download"]


def run_download(
    job: Job,
    client: Client,
    display: Display,
    interrupt: Interrupt,
    *,
    quiet: bool,
    clock: Clock,
    tz: tzinfo | None,
) -> int:
    """Download ``job`` with ``client`` and return the exit code.

    Continues from the checkpoint when it is of the same URL, starts again from zero
    once if the object changes on the server, and turns every way the download can end
    into its exit code and one ``display.failed`` report.
    """
    state = _load_checkpoint(job, display, quiet)
    not_before = job.window.not_before
    if not_before is not None and not_before.timestamp() > clock.wall():
        display.waiting(not_before)
    restarted = False
    try:
        while True:
            try:
                client.download(
                    job.url,
                    job.dest,
                    download_class=job.download_class,
                    not_before=job.window.not_before,
                    not_after=job.window.not_after,
                    wait_limit=job.wait_limit,
                    on_event=display.show,
                    on_state=job.save,
                    state=state,
                    cancelled=interrupt.is_set,
                )
            except ObjectChangedError as error:
                # The SDK has deleted the bytes of the old version; its checkpoint goes too.
                remove_checkpoint(job.checkpoint)
                if restarted:
                    raise
                restarted = True
                display.restarted(f"the file changed on the server ({error})")
                last = job.state
                state = (
                    DownloadState(download_id=last.download_id, ticket=last.ticket)
                    if last is not None
                    else None
                )
                job.state = None
                continue
            break
    except (DownloadCancelledError, KeyboardInterrupt):
        kept = job.checkpoint.exists()
        message = (
            f"interrupted; run the same command to continue ({job.checkpoint} keeps the place)"
            if kept
            else "interrupted"
        )
        display.failed("interrupted", message, {"exitCode": EXIT_INTERRUPTED})
        return EXIT_INTERRUPTED
    except QueueDeadlineError as error:
        now = datetime.fromtimestamp(clock.wall(), tz=UTC)
        display.failed(
            "queue_deadline",
            _deadline_message(error, now, tz),
            {
                "exitCode": EXIT_DEADLINE,
                "notAfter": json_time(error.not_after),
                "startsAt": json_time(error.starts_at),
            },
        )
        return EXIT_DEADLINE
    except InvalidRequestError as error:
        _discard_if_empty(job)
        display.failed("invalid_request", str(error), {"exitCode": EXIT_USAGE})
        return EXIT_USAGE
    except ArkvoryClientError as error:
        code, details = _failure(error)
        if isinstance(error, HTTPStatusError):
            _discard_if_empty(job)
        display.failed(code, str(error), {"exitCode": EXIT_FAILURE, **details})
        return EXIT_FAILURE
    except ValueError as error:
        display.failed("usage", str(error), {"exitCode": EXIT_USAGE})
        return EXIT_USAGE
    except OSError as error:
        where = f" ({error.filename})" if error.filename else ""
        display.failed("os_error", f"{error.strerror or error}{where}", {"exitCode": EXIT_FAILURE})
        return EXIT_FAILURE
    remove_checkpoint(job.checkpoint)
    return EXIT_OK


def _warn(quiet: bool, message: str) -> None:
    if not quiet:
        sys.stderr.write(f"{PROG}: warning: {message}\n")
        sys.stderr.flush()


def _load_checkpoint(job: Job, display: Display, quiet: bool) -> DownloadState | None:
    try:
        found = read_checkpoint(job.checkpoint)
    except (CheckpointError, OSError) as error:
        _warn(quiet, f"ignoring the checkpoint: {error}")
        return None
    if found is None:
        return None
    if found.url != job.url:
        _warn(quiet, f"{job.checkpoint} belongs to {found.url}; starting a new download")
        return None
    display.resumed(found.state, upgraded=found.upgraded)
    return found.state


def _discard_if_empty(job: Job) -> None:
    """After an error that ends the download for good before a byte was saved, leave no
    empty ``.part`` or checkpoint behind."""
    if job.state is not None and job.state.done > 0:
        return
    remove_checkpoint(job.checkpoint)
    part = part_path(job.dest)
    with contextlib.suppress(OSError):
        if part.stat().st_size == 0:
            part.unlink()


def _failure(error: ArkvoryClientError) -> tuple[str, Mapping[str, object]]:
    if isinstance(error, HTTPStatusError):
        return "http_status", {"status": error.status, "problem": error.problem}
    if isinstance(error, WaitLimitError):
        return "wait_limit", {"waited": round(error.waited, 3), "waitLimit": error.wait_limit}
    if isinstance(error, RetriesExhaustedError):
        reasons = [failure.reason for failure in error.history]
        return "retries_exhausted", {"failures": reasons}
    if isinstance(error, ObjectChangedError):
        return "object_changed", {}
    if isinstance(error, InvalidResponseError):
        return "invalid_response", {}
    return "error", {}


def _deadline_message(error: QueueDeadlineError, now: datetime, tz: tzinfo | None) -> str:
    deadline = clock_time(error.not_after, now=now, tz=tz)
    if error.starts_at is not None and error.starts_at > error.not_after:
        start = clock_time(error.starts_at, now=now, tz=tz)
        return f"the server expects to start at {start}, after --not-after {deadline}"
    return f"--not-after {deadline} passed before the download started"
