"""The live terminal display of ``arkvoryctl``, drawn with rich (ADR 0008).

On a terminal a waiting download is one status line updated in place — its start
countdown and the retry countdown tick every second between the server's answers — and
then a progress bar with rate and time left. Lines that must stay (a retry, the saved
file) are printed above whatever is live. A preempted download goes back to the status
line and gets a new bar when it starts again.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, tzinfo
from typing import Final, TextIO

from rich.console import Console, RenderableType
from rich.live import Live
from rich.progress import BarColumn, Progress, TaskID, TextColumn
from rich.spinner import Spinner
from rich.text import Text

from ._clock import Clock
from ._events import Completed, DownloadState, Event, Queued, Retrying, Started
from ._events import Progress as ProgressEvent
from ._render import (
    PROG,
    completed_line,
    eta_seconds,
    human_duration,
    queue_line,
    rate_text,
    retrying_line,
    size_text,
    started_line,
    waiting_line,
)

__all__ = ["TerminalDisplay"]

_REFRESH_PER_SECOND: Final = 4
_MIN_WAIT_TO_REPORT: Final = 1.0


class _QueueStatus:
    """The live status line: re-worded at every refresh so the countdowns move."""

    def __init__(self, clock: Clock, tz: tzinfo | None) -> None:
        self._clock = clock
        self.tz = tz
        self._spinner = Spinner("dots", style="cyan")
        self.event: Queued | None = None
        self.received = 0.0

    def update(self, event: Queued) -> None:
        self.event = event
        self.received = self._clock.wall()

    def __rich__(self) -> RenderableType:
        event = self.event
        if event is None:
            return Text("")
        wall = self._clock.wall()
        now = datetime.fromtimestamp(wall, tz=UTC)
        retry_in = max(0.0, event.retry_after - (wall - self.received))
        self._spinner.update(text=Text(queue_line(event, now=now, tz=self.tz, retry_in=retry_in)))
        return self._spinner


class TerminalDisplay:
    """A status line while queued, then a rich progress bar; errors go to ``err``."""

    def __init__(
        self,
        console: Console,
        err: TextIO,
        *,
        name: str,
        checkpoint: str,
        clock: Clock,
        tz: tzinfo | None = None,
    ) -> None:
        self._console = console
        self._err = err
        self._name = name
        self._checkpoint = checkpoint
        self._clock = clock
        self._status = _QueueStatus(clock, tz)
        self._live: Live | None = None
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._queued_since: float | None = None

    # ------------------------------------------------------------------ events
    def resumed(self, state: DownloadState, *, upgraded: bool) -> None:
        if upgraded:
            self._print(f"{self._checkpoint} has no download id; continuing as {state.download_id}")
        saved = f"{size_text(state.done)} saved" if state.done else "nothing saved yet"
        self._print(f"continuing the download of {self._name} ({saved})")

    def waiting(self, until: datetime) -> None:
        now = datetime.fromtimestamp(self._clock.wall(), tz=UTC)
        self._print(waiting_line(until, now=now, tz=self._status.tz))

    def show(self, event: Event) -> None:
        if isinstance(event, Queued):
            self._queued(event)
        elif isinstance(event, Started):
            self._started(event)
        elif isinstance(event, ProgressEvent):
            self._advance(event)
        elif isinstance(event, Retrying):
            self._print(retrying_line(event))
        elif isinstance(event, Completed):
            self._stop_progress()
            self._print(completed_line(event))

    def _queued(self, event: Queued) -> None:
        self._stop_progress()
        self._status.update(event)
        if self._queued_since is None:
            self._queued_since = self._clock.wall()
        if self._live is None:
            self._live = Live(
                self._status,
                console=self._console,
                refresh_per_second=_REFRESH_PER_SECOND,
                transient=True,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self._live.start()
        self._live.refresh()

    def _started(self, event: Started) -> None:
        self._stop_live()
        if self._queued_since is not None:
            waited = self._clock.wall() - self._queued_since
            self._queued_since = None
            if waited >= _MIN_WAIT_TO_REPORT:
                self._print(f"queued for {human_duration(waited)}")
        self._stop_progress()
        self._print(started_line(event, self._name))
        self._progress = Progress(
            TextColumn("{task.description}", markup=False),
            BarColumn(bar_width=None),
            TextColumn("{task.percentage:>3.0f} %"),
            TextColumn("{task.fields[amount]}", markup=False),
            TextColumn("{task.fields[rate]}", markup=False),
            TextColumn("{task.fields[eta]}", markup=False),
            console=self._console,
            refresh_per_second=_REFRESH_PER_SECOND,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self._task = self._progress.add_task(
            self._name,
            total=event.size,
            completed=event.offset,
            amount=_amount(event.offset, event.size),
            rate="",
            eta="",
        )
        self._progress.start()

    def _advance(self, event: ProgressEvent) -> None:
        if self._progress is None or self._task is None:
            return
        eta = eta_seconds(event.done, event.size, event.rate)
        done = event.size is not None and event.done >= event.size
        self._progress.update(
            self._task,
            completed=event.done,
            total=event.size,
            amount=_amount(event.done, event.size),
            rate=rate_text(event.rate),
            eta="" if eta is None or done else f"{human_duration(eta)} left",
        )

    def restarted(self, message: str) -> None:
        self._stop_progress()
        self._print(f"{message}; starting again from zero")

    def failed(self, code: str, message: str, details: Mapping[str, object]) -> None:
        self.close()
        self._err.write(f"{PROG}: {message}\n")
        self._err.flush()

    def close(self) -> None:
        self._stop_live()
        self._stop_progress()

    # ------------------------------------------------------------------ helpers
    def _print(self, text: str) -> None:
        self._console.print(text, markup=False, highlight=False)

    def _stop_live(self) -> None:
        live, self._live = self._live, None
        if live is not None:
            live.stop()

    def _stop_progress(self) -> None:
        progress, self._progress = self._progress, None
        self._task = None
        if progress is not None:
            progress.stop()


def _amount(done: int, size: int | None) -> str:
    if size is None:
        return size_text(done)
    return f"{size_text(done)}/{size_text(size)}"
