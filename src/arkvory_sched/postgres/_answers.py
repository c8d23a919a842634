"""The answer to a waiting session: its place, its estimate, its ticket.

Estimates come from the leader's last tick (a :class:`QueueSnapshot`, cached for
half a second of queue time) and the fleet's delivery rate.
"""

from __future__ import annotations

import asyncpg

from .._classes import DownloadClass
from .._clock import Clock
from .._early_polls import EarlyPolls
from .._model import (
    Decision,
    Queued,
    RejectReason,
)
from ..policy import (
    TICKET_REUSE_SECONDS,
    LinkRate,
    StartEstimate,
    WindowEstimate,
    answer_check_delay,
    estimate_interval,
    estimate_rate,
    estimate_start,
    exact_head,
    held_at_the_door,
    no_show_at,
    queued_retry_after,
    stride_ahead,
    strides_of,
    window_estimate,
)
from . import _sql as sql
from ._estimates import QueueSnapshot, QueueSnapshots
from ._leases import Lease
from ._meters import Meters
from ._running import Running
from ._ticket_key import TicketKeyring

__all__ = ["NEWCOMER_COUNT_CAP", "Answers"]

NEWCOMER_COUNT_CAP = 1024  # a newcomer's waiters-ahead count stops here


class Answers:
    """The ``Queued`` answer, the estimates behind it and the tickets it carries."""

    def __init__(
        self,
        running: Running,
        clock: Clock,
        snapshots: QueueSnapshots,
        meters: Meters,
        keyring: TicketKeyring,
        early: EarlyPolls,
    ) -> None:
        self._running = running
        self._clock = clock
        self._snapshots = snapshots
        self._meters = meters
        self._keyring = keyring
        self._early = early

    async def queued(
        self,
        conn: asyncpg.Connection,
        key: bytes,
        cls: DownloadClass,
        now: float,
        *,
        newcomer: asyncpg.Record | None = None,
        placed: asyncpg.Record | None = None,
        again: bool = False,
    ) -> Decision:
        """The answer to a waiting session: place, estimate, when to ask again.

        ``newcomer`` is ``admit_session``'s row for a session it has just queued: its
        place, counted up to ``NEWCOMER_COUNT_CAP``, and its arrival. A newcomer's place
        is only announced from its first poll on (R-EST-3), so beyond the cap the class
        length stands in: the estimate costs the same at the end of a long queue.
        ``placed`` is a ``POSITION`` row the caller has read already. ``again``: the
        session has just entered the queue again (a yield, a resumption); like a
        newcomer's, its first answer is not repeated to early polls (ADR 0029).
        """
        is_newcomer = newcomer is not None
        row = newcomer if newcomer is not None else placed
        if row is None:
            row = await conn.fetchrow(
                sql.POSITION, key, exact_head(self._running.settings.sessions)
            )
        if row is None:  # activated or released by another process a moment ago
            return self._meters.reject(RejectReason.STORAGE_UNAVAILABLE, 1, cls)
        snapshot = await self._snapshots.read(conn)
        own_ahead = row["own_ahead"]
        if is_newcomer and own_ahead >= NEWCOMER_COUNT_CAP:
            own_ahead = max(own_ahead, snapshot.class_lengths[row["queue_rank"]])
        estimate = self.estimate(
            own_ahead, row["queue_rank"], cls, snapshot, now, row.get("seq"), row["object_size"]
        )
        ahead, start, wall_offset = estimate.ahead, estimate.start, estimate.wall_offset
        delay = answer_check_delay(
            estimate,
            key,
            now=now,
            newcomer=is_newcomer,
            marked=bool(row["marked"]),
            free_at_mark=snapshot.free_at_mark,
            sessions=self._running.settings.sessions,
            rising=self._running.sizing_rising,
        )
        check_at = now + delay
        no_show = no_show_at(check_at, delay)
        retry_after = queued_retry_after(delay)
        if not is_newcomer:  # a newcomer's row already says exactly this
            back_at = now + retry_after
            # A start told on a guessed rate is not the first estimate to score (ADR 0042).
            scored = (start, now) if estimate.known else (None, None)
            await conn.execute(sql.RECORD_CHECK, key, check_at, no_show, *scored, back_at)
        answer = Queued(
            position=None if is_newcomer else ahead + 1,
            starts_at=start + wall_offset,
            starts_earliest=estimate.earliest + wall_offset,
            starts_latest=estimate.latest + wall_offset,
            check_at=check_at + wall_offset,
            retry_after=retry_after,
            download_class=cls,
            ticket=self.session_ticket(key, row),
            at_the_door=held_at_the_door(
                ahead + 1,
                estimate.earliest,
                now,
                sessions=self._running.settings.sessions,
                hold=self._running.settings.hold_seconds,
            ),
            guessed=not estimate.known,
        )
        if is_newcomer or again:  # a wait that just began: its next poll is decided
            self._early.forget(key)
        else:
            self._early.remember(key, answer, check_at, delay)
        return answer

    def estimate(
        self,
        own_ahead: int,
        queue_rank: int,
        cls: DownloadClass,
        snapshot: QueueSnapshot,
        now: float,
        seq: int | None = None,
        size: int = 0,
    ) -> StartEstimate:
        """A waiting session's place and start from its count in its own lane, as its
        poll computes them, recording nothing: :meth:`queued` and the principal's own
        downloads page (issue #19) read the same numbers. ``seq`` says who it is, to find
        its own entry in the leader's schedule.

        The waiters' count and bytes are the leader's last tick's: before a tick has
        seen anyone wait (a cold server), this waiter's own ``size`` stands for the mean
        download, or a slot taken since the tick would read as ending now."""
        settings = self._running.settings
        wall_offset = self._clock.wall() - now  # announced times are wall time (R-RES-5)
        window = self._window(cls, queue_rank, snapshot, now + wall_offset)
        ahead = stride_ahead(
            own_ahead,
            queue_rank,
            snapshot.passes,
            window.lengths,
            strides_of(settings.weights),
        )
        rate = self.fleet_rate(snapshot)
        start = estimate_start(
            snapshot.finish_table,
            ahead=ahead,
            now=now,
            sessions=settings.sessions,
            reserve=settings.reserve,
            interactive=cls is DownloadClass.INTERACTIVE,
            active=snapshot.active,
            active_interactive=snapshot.active_interactive,
            waiting=max(1, snapshot.waiting),
            waiting_bytes=snapshot.waiting_bytes if snapshot.waiting else float(size),
            rate=rate.bytes_per_second,
            schedule=snapshot.waiter_schedule,
            own_start=None if seq is None else snapshot.scheduled_starts.get(seq),
            table_at=snapshot.finish_table_at,
        )
        moved, not_before = window.start(start + wall_offset, now + wall_offset)
        start = moved - wall_offset
        earliest, latest = estimate_interval(start, now, known=rate.known)
        earliest = max(earliest, not_before - wall_offset)  # not before its window opens
        return StartEstimate(ahead, start, earliest, latest, wall_offset, window, rate.known)

    def _window(
        self, cls: DownloadClass, queue_rank: int, snapshot: QueueSnapshot, wall: float
    ) -> WindowEstimate:
        """What the windows change in an estimate made at ``wall`` (R-WIN-2, R-EST-2)."""
        settings = self._running.settings
        if not settings.class_windows:
            return WindowEstimate(snapshot.class_lengths)
        return window_estimate(
            self._running.class_gate(),
            settings.schedule_of(cls),
            cls.rank,
            queue_rank,
            snapshot.class_lengths,
            snapshot.active_by_class,
            wall=wall,
        )

    def session_ticket(self, key: bytes, stored: asyncpg.Record) -> str | None:
        """The session's ticket, its arrival from the row the answer was made from."""
        signer = self._keyring.signer
        if signer is None:
            return None
        arrival_ms = stored["arrival_wall_ms"]
        return signer.issue(key, arrival_ms, max(int(self._clock.wall() * 1000), arrival_ms))

    def lease_ticket(self, lease: Lease, now: float) -> str | None:
        """As in memory: an active session's ticket is re-signed at most once a minute."""
        signer = self._keyring.signer
        if signer is None:
            return None
        if lease.ticket is not None and now - lease.ticket_issued < TICKET_REUSE_SECONDS:
            return lease.ticket
        lease.ticket = signer.issue(
            lease.key,
            lease.arrival_wall_ms,
            max(int(self._clock.wall() * 1000), lease.arrival_wall_ms),
        )
        lease.ticket_issued = now
        return lease.ticket

    def fleet_rate(self, snapshot: QueueSnapshot | None) -> LinkRate:
        """The fleet's delivery rate for estimates, as the leader read it (ADR 0034).

        Never this process's own reading: that is one process's share of the link,
        read without knowing whether the slots were busy.
        """
        bandwidth = self._running.settings.bandwidth
        if snapshot is None:
            return estimate_rate(0.0, 0.0, bandwidth)
        return snapshot.rate(bandwidth)
