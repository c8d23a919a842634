"""``arkvoryctl``: download a file from an Arkvory server, waiting out its queue.

::

    arkvoryctl download URL [-o FILE] [--class CLASS] [--wait-limit DURATION]
                            [--not-before TIME] [--not-after TIME] [--token TOKEN]
                            [--quiet | --json]

A busy server is not a failure: the download waits as long as the server's queue asks
(no deadline unless ``--wait-limit``), showing its place and estimated start
(``queued, 312th, start ≈ 14:05 (in 47 min)``), then a progress bar (R-CLI-1, R-VIS-1).
On a terminal both update in place; in a log or a pipe each new fact is a new line.

Next to ``FILE`` the download keeps ``FILE.part`` (the bytes so far) and
``FILE.arkvory.json`` (the checkpoint: download id, ETag, bytes saved, queue ticket).
Running the same command again — after Ctrl-C, a crash or a reboot — continues the same
download in the same place in the queue. The checkpoint is deleted once the file is
complete. If the object changes on the server mid-download, the download starts again
from zero once, and says so.

Exit codes:

* 0 — the file is complete;
* 1 — failure: an HTTP error (``404``, ``403`` …), real failures that spent the retry
  budget, the ``--wait-limit`` used up, a broken response, a file-system error;
* 2 — usage: a bad option, duration, time, class or URL;
* 4 — ``--not-after``: the download would not start before the deadline;
* 130 — interrupted (Ctrl-C); the checkpoint is kept to continue later.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import re
import signal
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from types import FrameType
from typing import Final

import httpx
from rich.console import Console

from ._checkpoint import (
    CHECKPOINT_SUFFIX,
    CheckpointError,
    checkpoint_path,
    read_checkpoint,
    remove_checkpoint,
    write_checkpoint,
)
from ._clock import Clock, Sleeper, SystemClock
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
from ._render import PROG, Display, JsonDisplay, PlainDisplay, QuietDisplay, clock_time, json_time
from ._render_tty import TerminalDisplay
from ._sync import Client
from ._windows import Window, parse_time, resolve_window

__all__ = [
    "CLASSES",
    "EXIT_DEADLINE",
    "EXIT_FAILURE",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "build_parser",
    "main",
    "output_name",
    "parse_duration",
]

EXIT_OK: Final = 0
EXIT_FAILURE: Final = 1
EXIT_USAGE: Final = 2
EXIT_DEADLINE: Final = 4
EXIT_INTERRUPTED: Final = 130

CLASSES: Final = ("interactive", "release", "bulk", "background")
"""The built-in download classes (R-CLASS-1); a client may only lower its own."""
TOKEN_ENV: Final = "ARKVORY_TOKEN"

_EPILOG: Final = f"""\
DURATION: 90s, 15m, 2h, 1h30m, 1d, or plain seconds.
TIME: RFC 3339 (2026-05-28T21:00:00Z) or HH:MM local time (its next occurrence).
The token is sent as "Authorization: Bearer TOKEN"; without --token, ${TOKEN_ENV} is used.

Next to FILE the download keeps FILE.part and the checkpoint FILE{CHECKPOINT_SUFFIX};
running the same command again continues the download in the same place in the queue.

exit codes:
  {EXIT_OK}    the file is complete
  {EXIT_FAILURE}    failure: HTTP error, retries exhausted, --wait-limit used up, file system
  {EXIT_USAGE}    usage: bad option, duration, time, class or URL
  {EXIT_DEADLINE}    --not-after: the download would not start before the deadline
  {EXIT_INTERRUPTED}  interrupted (Ctrl-C); the checkpoint is kept to continue later
"""

_DURATION: Final = re.compile(
    r"(?:(?P<d>\d+)d)?(?:(?P<h>\d+)h)?(?:(?P<m>\d+)m)?(?:(?P<s>\d+(?:\.\d+)?)s)?"
)
_SECONDS: Final = re.compile(r"\d+(?:\.\d+)?")
_UNIT_SECONDS: Final = {"d": 86_400, "h": 3600, "m": 60, "s": 1}
_UNSAFE_NAME: Final = re.compile(r'[\x00-\x1f\x7f/\\<>:"|?*]')
_MAX_NAME_BYTES: Final = 255
_SLEEP_SLICE: Final = 0.1


# ---------------------------------------------------------------------- parsing
def parse_duration(text: str) -> float:
    """Seconds in ``text``: ``90s``, ``15m``, ``2h``, ``1h30m``, ``1d`` or plain seconds.

    Raises ``ValueError`` naming the accepted forms.
    """
    value = text.strip().lower()
    if _SECONDS.fullmatch(value):
        seconds = float(value)
    else:
        match = _DURATION.fullmatch(value)
        if not value or match is None:
            raise ValueError(f"{text!r} is not a duration; use e.g. 90s, 15m, 2h, 1h30m or seconds")
        seconds = sum(float(match[unit] or 0) * factor for unit, factor in _UNIT_SECONDS.items())
    if not math.isfinite(seconds):
        raise ValueError(f"{text!r} is too long a duration")
    return seconds


def output_name(url: str) -> str:
    """The default output file of ``url``: its last path segment, URL-decoded, made safe.

    Separators, control characters and characters that Windows forbids become ``_``;
    raises ``ValueError`` when no usable name remains (then ``-o`` is needed).
    """
    segment = urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1]
    name = _UNSAFE_NAME.sub("_", urllib.parse.unquote(segment)).strip().rstrip(". ")
    if name in ("", ".", ".."):
        raise ValueError(f"cannot tell a file name from {url!r}; name one with -o FILE")
    if len(name.encode()) > _MAX_NAME_BYTES:
        raise ValueError(f"the file name in {url!r} is too long; name one with -o FILE")
    return name


def _duration_argument(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``arkvoryctl`` (its ``--help`` documents the exit codes)."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Download from an Arkvory artifact server, waiting out its queue.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    download = commands.add_parser(
        "download",
        help="download URL to a file, waiting in the server's queue as long as it takes",
        description=(
            "Download URL to FILE. A busy server is waited out (no deadline unless\n"
            "--wait-limit), showing the place in the queue and the estimated start,\n"
            "then the progress."
        ),
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    download.add_argument("url", metavar="URL", help="the http(s) URL of the file")
    download.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="where to save it (default: the URL's last path segment, in this directory)",
    )
    download.add_argument(
        "--class",
        dest="download_class",
        metavar="CLASS",
        choices=CLASSES,
        help=f"ask for a lower class: {', '.join(CLASSES)}",
    )
    download.add_argument(
        "--wait-limit",
        metavar="DURATION",
        type=_duration_argument,
        help="give up (exit 1) after waiting this long for the server (default: no limit)",
    )
    download.add_argument("--not-before", metavar="TIME", help="do not ask the server before TIME")
    download.add_argument(
        "--not-after",
        metavar="TIME",
        help="stop (exit 4) if the download would not start before TIME",
    )
    download.add_argument("--token", metavar="TOKEN", help=f"bearer token (default: ${TOKEN_ENV})")
    output = download.add_mutually_exclusive_group()
    output.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")
    output.add_argument(
        "--json", action="store_true", help="print one JSON object per event per line"
    )
    download.set_defaults(parser=download)
    return parser


# ---------------------------------------------------------------------- Ctrl-C
class _Interrupt:
    """Ctrl-C sets a flag that the download polls between chunks and sleep steps, so it
    stops where its checkpoint is consistent; a second Ctrl-C stops at once."""

    def __init__(self) -> None:
        self.flag = threading.Event()
        self._previous: Callable[[int, FrameType | None], object] | int | None = None
        self._installed = False

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # signals reach only the main thread; an embedding caller handles them
        self._previous = signal.signal(signal.SIGINT, self._handle)
        self._installed = True

    def restore(self) -> None:
        if self._installed:
            previous = self._previous if self._previous is not None else signal.SIG_DFL
            signal.signal(signal.SIGINT, previous)
            self._installed = False

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.flag.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    def is_set(self) -> bool:
        return self.flag.is_set()

    def sleep(self, seconds: float) -> None:
        """``time.sleep`` that ends early on Ctrl-C (a plain sleep would resume after
        the signal and hold the user for up to a minute)."""
        end = time.monotonic() + seconds
        while not self.flag.is_set():
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, _SLEEP_SLICE))


# ---------------------------------------------------------------------- the run
@dataclass
class _Job:
    """One ``arkvoryctl download``: what to fetch, where, and the last state saved."""

    url: str
    dest: Path
    window: Window
    download_class: str | None
    wait_limit: float | None
    headers: dict[str, str]
    checkpoint: Path = field(init=False)
    state: DownloadState | None = None

    def __post_init__(self) -> None:
        self.checkpoint = checkpoint_path(self.dest)

    def save(self, state: DownloadState) -> None:
        """The SDK's ``on_state``: persist what a new process needs to continue."""
        write_checkpoint(self.checkpoint, self.url, state)
        self.state = state

    def download_id(self) -> str | None:
        return self.state.download_id if self.state is not None else None


class _UsageError(Exception):
    """A usage error found after parsing (exit 2, with the usage line)."""


def main(
    argv: Sequence[str] | None = None,
    *,
    transport: httpx.BaseTransport | None = None,
    clock: Clock | None = None,
    sleep: Sleeper | None = None,
    tz: tzinfo | None = None,
) -> int:
    """Run ``arkvoryctl`` and return its exit code.

    The keyword arguments exist for tests: an ``httpx`` transport instead of the
    network, a clock and a sleep that run a long queue in no time, and the time zone
    of ``HH:MM`` and of the times shown (default: local).
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:
        return stop.code if isinstance(stop.code, int) else EXIT_USAGE
    clock = clock or SystemClock()
    try:
        job = _job(args, clock, tz)
    except _UsageError as error:
        command: argparse.ArgumentParser = args.parser
        command.print_usage(sys.stderr)
        sys.stderr.write(f"{command.prog}: error: {error}\n")
        return EXIT_USAGE
    interrupt = _Interrupt()
    display = _display(args, job, clock, tz)
    interrupt.install()
    try:
        with Client(
            transport=transport,
            headers=job.headers,
            clock=clock,
            sleep=sleep or interrupt.sleep,
            tz=tz,
        ) as client:
            return _run(job, client, display, interrupt, quiet=args.quiet, clock=clock, tz=tz)
    except KeyboardInterrupt:  # a second Ctrl-C outside the download itself
        return EXIT_INTERRUPTED
    finally:
        display.close()
        interrupt.restore()


def _job(args: argparse.Namespace, clock: Clock, tz: tzinfo | None) -> _Job:
    url: str = args.url.strip()
    parts = urllib.parse.urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise _UsageError(f"{url!r} is not an http(s) URL")
    try:
        dest = Path(args.output) if args.output else Path(output_name(url))
    except ValueError as error:
        raise _UsageError(str(error)) from None
    if dest.name in ("", ".", "..") or dest.is_dir():
        raise _UsageError(f"{str(dest)!r} is a directory; name the file to write")
    now = datetime.fromtimestamp(clock.wall(), tz=UTC)
    for option, value in (("--not-before", args.not_before), ("--not-after", args.not_after)):
        try:
            if value is not None:
                parse_time(value, now=now, tz=tz)
        except ValueError as error:
            raise _UsageError(f"argument {option}: {error}") from None
    try:
        window = resolve_window(args.not_before, args.not_after, now=now, tz=tz)
    except ValueError as error:
        message = str(error).replace("not_before", "--not-before")
        raise _UsageError(message.replace("not_after", "--not-after")) from None
    token = args.token if args.token is not None else os.environ.get(TOKEN_ENV, "")
    headers = {"Authorization": f"Bearer {token.strip()}"} if token.strip() else {}
    return _Job(
        url=url,
        dest=dest,
        window=window,
        download_class=args.download_class,
        wait_limit=args.wait_limit,
        headers=headers,
    )


def _display(args: argparse.Namespace, job: _Job, clock: Clock, tz: tzinfo | None) -> Display:
    out, err = sys.stdout, sys.stderr
    name = str(job.dest)
    if args.json:
        return JsonDisplay(out, download_id=job.download_id)
    if args.quiet:
        return QuietDisplay(err)
    if _is_terminal(out):
        console = Console(file=out, force_terminal=True, highlight=False)
        return TerminalDisplay(
            console, err, name=name, checkpoint=str(job.checkpoint), clock=clock, tz=tz
        )
    return PlainDisplay(out, err, name=name, checkpoint=str(job.checkpoint), clock=clock, tz=tz)


def _is_terminal(stream: object) -> bool:
    """Live output only on a real terminal that can move its cursor."""
    isatty = getattr(stream, "isatty", None)
    try:
        tty = bool(isatty()) if callable(isatty) else False
    except ValueError:  # a closed stream
        return False
    return tty and os.environ.get("TERM", "") != "dumb"


def _warn(quiet: bool, message: str) -> None:
    if not quiet:
        sys.stderr.write(f"{PROG}: warning: {message}\n")
        sys.stderr.flush()


def _run(
    job: _Job,
    client: Client,
    display: Display,
    interrupt: _Interrupt,
    *,
    quiet: bool,
    clock: Clock,
    tz: tzinfo | None,
) -> int:
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


def _load_checkpoint(job: _Job, display: Display, quiet: bool) -> DownloadState | None:
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


def _discard_if_empty(job: _Job) -> None:
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


if __name__ == "__main__":
    sys.exit(main())
