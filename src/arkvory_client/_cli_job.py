"""What one ``arkvoryctl download`` is to do, checked and resolved from its arguments.

The URL, the output file, ``--not-before``/``--not-after`` (against the clock, in the
user's time zone) and the token are checked together here, after ``argparse``, so every
mistake is a usage error (exit 2) before the first request; the job then carries the
last saved :class:`DownloadState` that its checkpoint holds.
"""

from __future__ import annotations

import argparse
import os
import urllib.parse
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from pathlib import Path

from ._checkpoint import checkpoint_path, write_checkpoint
from ._cli_parser import TOKEN_ENV, output_name
from ._clock import Clock
from ._events import DownloadState
from ._windows import Window, parse_time, resolve_window

__all__ = ["Job", "UsageError", "job_from_args"]


@dataclass
class Job:
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


class UsageError(Exception):
    """A usage error found after parsing (exit 2, with the usage line)."""


def job_from_args(args: argparse.Namespace, clock: Clock, tz: tzinfo | None) -> Job:
    """The job the parsed ``args`` describe; raises :class:`UsageError` for what
    ``argparse`` cannot check: the URL, the file name, the times and their order."""
    url: str = args.url.strip()
    parts = urllib.parse.urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise UsageError(f"{url!r} is not an http(s) URL")
    try:
        dest = Path(args.output) if args.output else Path(output_name(url))
    except ValueError as error:
        raise UsageError(str(error)) from None
    if dest.name in ("", ".", "..") or dest.is_dir():
        raise UsageError(f"{str(dest)!r} is a directory; name the file to write")
    now = datetime.fromtimestamp(clock.wall(), tz=UTC)
    for option, value in (("--not-before", args.not_before), ("--not-after", args.not_after)):
        try:
            if value is not None:
                parse_time(value, now=now, tz=tz)
        except ValueError as error:
            raise UsageError(f"argument {option}: {error}") from None
    try:
        window = resolve_window(args.not_before, args.not_after, now=now, tz=tz)
    except ValueError as error:
        message = str(error).replace("not_before", "--not-before")
        raise UsageError(message.replace("not_after", "--not-after")) from None
    token = args.token if args.token is not None else os.environ.get(TOKEN_ENV, "")
    headers = {"Authorization": f"Bearer {token.strip()}"} if token.strip() else {}
    return Job(
        url=url,
        dest=dest,
        window=window,
        download_class=args.download_class,
        wait_limit=args.wait_limit,
        headers=headers,
    )
