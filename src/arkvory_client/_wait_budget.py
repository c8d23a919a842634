"""The waits a download plans, and how much longer it may wait: ``wait_limit``, ``not_after``.

Both bound the waiting, never the transfer (R-CLIENT-2, 7): a busy answer or a back-off
plans a wait, and the wait is cut where the limit or the deadline falls. Waiting for the
caller's own ``not_before`` is not waiting for the server and counts against neither. The next busy
answer after such a cut wait then ends the download, whatever rounding of the measured
time says, so a download never waits past either bound by more than one request.
"""

from __future__ import annotations

from datetime import datetime

from ._exceptions import QueueDeadlineError, WaitLimitError
from ._retry_after import StartsAt
from ._steps import Wait

__all__ = ["WaitBudget", "check_not_too_late"]


class WaitBudget:
    """The next wait planned, and the seconds spent waiting for the server so far against
    ``limit`` (``None``: no limit) and the ``not_after`` deadline of the caller's window."""

    def __init__(self, limit: float | None) -> None:
        self.limit = limit
        self.waited = 0.0
        # Set when a wait was cut at the limit or the deadline: after it, the limit is
        # reached whatever rounding of the measured time says.
        self._limit_reached = False
        self._deadline_reached = False
        self._planned: tuple[float, str] | None = None
        self._reason = ""
        self._started: tuple[float, float] = (0.0, 0.0)

    @property
    def planned(self) -> bool:
        """A wait is planned: it comes before the next request."""
        return self._planned is not None

    def plan_not_before(self, seconds: float) -> None:
        """Wait ``seconds`` for the caller's ``not_before``: not cut, not counted."""
        self._planned = (seconds, "not_before")

    def plan(self, seconds: float, reason: str, *, deadline_left: float | None = None) -> None:
        """Plan a wait of ``seconds`` for the server, cut by :meth:`cut`."""
        self._planned = (self.cut(seconds, deadline_left=deadline_left), reason)

    def begin(self, now_wall: float, now_mono: float) -> Wait:
        """The planned wait starts now."""
        assert self._planned is not None
        seconds, self._reason = self._planned
        self._planned = None
        self._started = (now_wall, now_mono)
        return Wait(now_wall + seconds, seconds, self._reason)

    def end(self, now_wall: float, now_mono: float) -> None:
        """The wait begun last is over: count it, unless it was for ``not_before``."""
        if self._reason != "not_before":
            started_wall, started_mono = self._started
            # Wall time counts a suspended laptop; monotonic time a clock set back.
            self.waited += max(now_wall - started_wall, now_mono - started_mono, 0.0)

    def deadline_left(
        self,
        not_after: datetime,
        starts: StartsAt | None,
        last_start: StartsAt | None,
        now_wall: float,
    ) -> float:
        """Seconds left before ``not_after`` for a download still queued.

        Raises :class:`QueueDeadlineError` when the server expects to start (``starts``)
        after the deadline, or when the deadline has passed; ``last_start`` is the last
        estimate the server gave, reported with the error. A guessed start (ADR 0042)
        gives up only when even its earliest is after the deadline: a cold server's
        guess is no reason to stop.
        """
        last = last_start.point if last_start is not None else None
        expected = None
        if starts is not None:
            expected = starts.earliest if starts.guessed else starts.point
        if expected is not None and expected > not_after:
            raise QueueDeadlineError(
                f"the server expects to start at {expected.isoformat()}, "
                f"after not_after ({not_after.isoformat()})",
                not_after=not_after,
                starts_at=expected,
            )
        left = not_after.timestamp() - now_wall
        if left <= 0 or self._deadline_reached:
            raise QueueDeadlineError(
                f"not_after ({not_after.isoformat()}) passed while queued",
                not_after=not_after,
                starts_at=last,
            )
        return left

    def cut(self, seconds: float, *, deadline_left: float | None = None) -> float:
        """A wait of ``seconds``, cut at the wait limit and at ``deadline_left``.

        Raises :class:`WaitLimitError` when the limit is already used up.
        """
        limit_left: float | None = None
        if self.limit is not None:
            limit_left = self.limit - self.waited
            if limit_left <= 0 or self._limit_reached:
                raise WaitLimitError(
                    f"waited {self.waited:.0f} s for the server; wait_limit is {self.limit:.0f} s",
                    waited=self.waited,
                    wait_limit=self.limit,
                )
            seconds = min(seconds, limit_left)
        if deadline_left is not None:
            seconds = min(seconds, deadline_left)
            self._deadline_reached = seconds >= deadline_left
        self._limit_reached = limit_left is not None and seconds >= limit_left
        return seconds


def check_not_too_late(not_after: datetime, now_wall: float) -> None:
    """Before the first request: raise :class:`QueueDeadlineError` once ``not_after`` has
    passed, since the download could no longer start in time."""
    if now_wall >= not_after.timestamp():
        raise QueueDeadlineError(
            f"not_after ({not_after.isoformat()}) passed before the download started",
            not_after=not_after,
            starts_at=None,
        )
