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

This module wires the parts together: :mod:`._cli_parser` (the options, their formats
and the exit codes), :mod:`._cli_job` (the arguments checked into one job),
:mod:`._cli_download` (the download and the exit code it ends with) and
:mod:`._cli_interrupt` (Ctrl-C).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from datetime import tzinfo

import httpx
from rich.console import Console

from ._cli_download import run_download
from ._cli_interrupt import Interrupt
from ._cli_job import Job, UsageError, job_from_args
from ._cli_parser import EXIT_INTERRUPTED, EXIT_USAGE, build_parser
from ._clock import Clock, Sleeper, SystemClock
from ._render import Display, JsonDisplay, PlainDisplay, QuietDisplay
from ._render_tty import TerminalDisplay
from ._sync import Client

__all__ = ["main"]


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
        job = job_from_args(args, clock, tz)
    except UsageError as error:
        command: argparse.ArgumentParser = args.parser
        command.print_usage(sys.stderr)
        sys.stderr.write(f"{command.prog}: error: {error}\n")
        return EXIT_USAGE
    interrupt = Interrupt()
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
            return run_download(
                job, client, display, interrupt, quiet=args.quiet, clock=clock, tz=tz
            )
    except KeyboardInterrupt:  # a second Ctrl-C outside the download itself
        return EXIT_INTERRUPTED
    finally:
        display.close()
        interrupt.restore()


def _display(args: argparse.Namespace, job: Job, clock: Clock, tz: tzinfo | None) -> Display:
    """JSON lines, errors only, live lines on a terminal, or plain lines for a log."""
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


if __name__ == "__main__":
    sys.exit(main())
