"""The answers a waiting or refused client gets: estimates, ``Queued``, tickets, refusals.

It owns what only the answers need — the delivery rate's last peak, the table of when
each slot frees (R-EST-1), the ticket signer — and records on a waiting session what
its answer promised (its next check, its no-show deadline, its first estimate). A
waiter's repeated answer is remembered in the early polls (ADR 0029), which the
admission consults and the session table forgets when the waiter takes a slot.
"""

from __future__ import annotations

import math
from itertools import islice

from .._classes import DownloadClass
from .._clock import Clock
from .._early_polls import EarlyPolls
from .._model import (
    Queued,
    Rejected,
    RejectReason,
)
from .._rate import BusySeconds, PeakRateMeter, peak_of_means, reading_min_run
from .._slot_sizer import SlotSizer
from .._tickets import TicketSigner
from ..policy import (
    DELIVERY_SECONDS,
    SCHEDULED_WAITERS,
    TICKET_REUSE_SECONDS,
    LinkRate,
    SlotShares,
    StartEstimate,
    WindowEstimate,
    answer_check_delay,
    busy_retry_after,
    estimate_interval,
    estimate_rate,
    estimate_start,
    held_at_the_door,
    next_slot_free,
    no_show_at,
    queue_schedule,
    queued_retry_after,
    scheduled,
    sending_pace,
    slot_shares,
    window_estimate,
)
from ..settings import SchedulerSettings
from ._counters import Counters
from ._session import Session
from ._slots import Slots
from ._table import SessionTable

__all__ = ["Answers"]


class Answers:
    """Delivery rate, start estimates, the ``Queued`` answer, tickets and refusals."""

    __slots__ = ("_busy", "_clock", "_counters", "_early", "_finish_table", "_finish_table_at",
                 "_finish_table_rate",
                 "_last_rate", "_rate", "_schedule", "_scheduled_starts", "_signer", "_sizer",
                 "_slots", "_table", "settings")  # fmt: skip

    def __init__(
        self,
        settings: SchedulerSettings,
        clock: Clock,
        signer: TicketSigner | None,
        *,
        table: SessionTable,
        slots: Slots,
        rate: PeakRateMeter,
        early: EarlyPolls,
        counters: Counters,
        sizer: SlotSizer,
    ) -> None:
        self.settings = settings
        self._sizer = sizer  # the self-sizing count's course (rising_slots)
        self._clock = clock
        self._signer = signer
        self._table = table
        self._slots = slots
        self._rate = rate
        self._early = early
        self._counters = counters
        self._last_rate = 0.0
        self._busy = BusySeconds(rate.window_seconds)
        self._finish_table: list[float] = []
        self._schedule: list[float] = []
        # Each scheduled waiter's own start, by its key (estimate_start's own_start).
        self._scheduled_starts: dict[bytes, float] = {}
        self._finish_table_at = -math.inf
        self._finish_table_rate = 0.0

    # ================================================================ estimates
    def note_busy(self, now: float) -> None:
        """What the tick saw: the slots are busy when someone waits or every slot is
        held; only such seconds are read into the rate (ADR 0034)."""
        table = self._table
        self._busy.note(now, bool(table.queue) or len(table.active) >= self.settings.sessions)

    def current_rate(self) -> LinkRate:
        now = self._clock.monotonic()
        bandwidth = self.settings.bandwidth
        peak = self._rate.peak(now, self._busy, min_run=reading_min_run(bandwidth is not None))
        if peak > 0:
            # The first reading is one second's, and a second in which the slots
            # changed hands reads low: the delivery run so far is a rate the link
            # carried too (issue #28).
            peak = max(peak, self._rate.run_rate(now))
            self._last_rate = peak
        if peak or self._last_rate or bandwidth is not None:
            return estimate_rate(peak, self._last_rate, bandwidth)
        return estimate_rate(0.0, 0.0, None, self.provisional_rate(now))

    def provisional_rate(self, now: float) -> float:
        """What a cold server has seen the link carry at best: every second read, busy
        or not, and the delivery run so far, which reads the second in progress. It is
        read only until a busy second counts (ADR 0034), and is a floor of what the
        link can carry."""
        seconds = self._rate.complete_seconds(now)[1]
        return max(peak_of_means(seconds), self._rate.run_rate(now))

    def recent_delivery(self, now: float) -> tuple[float, float]:
        """What the link carried over the last complete seconds, in bytes per second,
        and when the first of them began: the self-sizing slots' reading (ADR 0038)."""
        first, seconds = self._rate.complete_seconds(now)
        recent = seconds[-DELIVERY_SECONDS:]
        return sum(recent) / DELIVERY_SECONDS, float(first + len(seconds) - len(recent))

    def next_slot_free(self, now: float) -> float:
        """When the next running session is expected to end, at its share of the rate now
        (whether a marked waiter not yet here keeps its turn, issue #28). Computed from
        the sessions as they are, not the finish table: that is up to a second old, and
        would name the session that just freed its slot."""
        active = self._table.active
        if not active:
            return math.inf
        per_session = self.current_rate().bytes_per_second / len(active)
        return next_slot_free(
            (now + session.remaining_bytes() / per_session for session in active.values()),
            now,
        )

    def shares(self, now: float, rate: LinkRate) -> SlotShares:
        """Each held slot's share of ``rate``, in the order of the active sessions, and a
        later session's: a session its client limits keeps its own pace (R-EST-1). Only
        a session sending now shows one: between two ranges a client is not slow."""
        return slot_shares(
            [
                sending_pace(
                    session.sent_bytes(),
                    session.slot_since,
                    now if session.bytes_in_flight else None,
                )
                for session in self._table.active.values()
            ],
            rate.bytes_per_second,
            self.settings.sessions,
            known=rate.known,
        )

    def refresh_finish_table(self, now: float) -> SlotShares:
        """When each slot frees, from the remaining bytes of active sessions (R-EST-1),
        and the held slots' shares it was made with (the tick's marking reads them)."""
        table, settings = self._table, self.settings
        active = table.active
        link = self.current_rate()
        rate = link.bytes_per_second
        shares = self.shares(now, link)
        remaining = [session.remaining_bytes() for session in active.values()]
        self._finish_table, schedule_table = shares.tables(remaining, now, settings.sessions)
        self._finish_table_at, self._finish_table_rate = now, rate
        if not (scheduled(settings) and table.queue):
            self._schedule, self._scheduled_starts = [], {}
            return shares
        first = list(islice(table.queue.iter_fair(), SCHEDULED_WAITERS))
        self._schedule = queue_schedule(
            schedule_table,
            (s.remaining_bytes() for s in first),
            shares.per_slot,
            followers=settings.sessions,
            limited_share=shares.limited_share,
        )
        self._scheduled_starts = {
            s.key: start for s, start in zip(first, self._schedule, strict=False)
        }
        return shares

    def _estimate_start(self, session: Session, ahead: int, now: float, rate: float) -> float:
        settings, table = self.settings, self._table
        # Refreshed each second, and as soon as the rate moves: a cold server's first
        # reading replaces its guess within the second, and answers made meanwhile
        # from the guess's table came 20 % late (issue #28).
        if now - self._finish_table_at > 1.0 or _moved(rate, self._finish_table_rate):
            self.refresh_finish_table(now)
        return estimate_start(
            self._finish_table,
            ahead=ahead,
            now=now,
            sessions=settings.sessions,
            reserve=settings.reserve,
            interactive=session.interactive,
            active=len(table.active),
            active_interactive=table.active_interactive,
            waiting=len(table.queue),
            waiting_bytes=table.waiting_bytes,
            rate=rate,
            schedule=self._schedule,
            own_start=self._scheduled_starts.get(session.key),
            table_at=self._finish_table_at,
        )

    def estimate(self, session: Session, now: float) -> StartEstimate:
        """A waiting session's place and start as its next poll computes them, without
        recording anything (the poll's deadline, the scored first estimate and the
        ticket are the caller's to record): :meth:`queued` and the principal's own
        downloads page (issue #19) read the same numbers."""
        wall_offset = self._clock.wall() - now  # announced times are wall time (R-RES-5)
        window = self._window(session, now + wall_offset)
        ahead = self._table.queue.ahead_of(session, window.lengths)
        rate = self.current_rate()
        start = self._estimate_start(session, ahead, now, rate.bytes_per_second)
        moved, not_before = window.start(start + wall_offset, now + wall_offset)
        start = moved - wall_offset
        earliest, latest = estimate_interval(start, now, known=rate.known)
        earliest = max(earliest, not_before - wall_offset)  # not before its window opens
        return StartEstimate(ahead, start, earliest, latest, wall_offset, window, rate.known)

    def queued(
        self, session: Session, now: float, *, newcomer: bool, again: bool = False
    ) -> Queued:
        """The answer to a waiting session. ``again``: it has just entered the queue
        again (a yield, a resumption); like a newcomer's, its first answer is not
        repeated to early polls (ADR 0029)."""
        estimate = self.estimate(session, now)
        ahead, start, wall_offset = estimate.ahead, estimate.start, estimate.wall_offset
        table = self._table
        delay = answer_check_delay(
            estimate,
            session.key,
            now=now,
            newcomer=newcomer,
            marked=session.mark == table.mark_epoch,
            free_at_mark=table.free_at_mark,
            sessions=self.settings.sessions,
            rising=self._sizer.rising(now),
            polls_are_free=True,  # a poll is a dictionary lookup here
        )
        if (
            not newcomer
            and estimate.known  # a guess is judged by its interval only (ADR 0042)
            and session.first_estimate is None
            and session.blocked_by is None
        ):
            session.first_estimate = start
            session.first_estimate_at = now
        session.check_at = now + delay
        retry_after = queued_retry_after(delay)
        session.back_at = now + retry_after
        session.no_show_at = no_show_at(session.check_at, delay)
        table.deadlines.schedule(session, session.no_show_at)
        answer = Queued(
            position=ahead + 1,  # a newcomer's too: counted as its polls are (R-EST-3)
            starts_at=start + wall_offset,
            starts_earliest=estimate.earliest + wall_offset,
            starts_latest=estimate.latest + wall_offset,
            check_at=session.check_at + wall_offset,
            retry_after=retry_after,
            download_class=session.base_class,
            ticket=self.issue_ticket(session),
            at_the_door=held_at_the_door(
                ahead + 1,
                estimate.earliest,
                now,
                sessions=self.settings.sessions,
                hold=self.settings.hold_seconds,
            ),
            guessed=not estimate.known,
        )
        if newcomer or again:  # a wait that just began: its next poll is decided
            self._early.forget(session.key)
        elif session.has_id:
            self._early.remember(session.key, answer, session.check_at, delay)
        return answer

    def _window(self, session: Session, wall: float) -> WindowEstimate:
        """What the windows change in an estimate made at ``wall`` (R-WIN-2, R-EST-2):
        closed classes are ahead of nobody; a waiter of one starts after its opening
        and asks again no later than that."""
        settings, queue = self.settings, self._table.queue
        if not settings.class_windows:
            return WindowEstimate(queue.lengths)
        return window_estimate(
            self._slots.class_gate(),
            settings.schedule_of(session.base_class),
            session.base_class.rank,
            session.queue_rank,
            queue.lengths,
            self._table.active_by_class,
            wall=wall,
        )

    # ================================================================ tickets
    def active_ticket(self, session: Session, now: float) -> str | None:
        """The ticket for a range of an active session, signed at most once a minute.

        A ticket is accepted for 15 minutes, so one signed a minute ago is as good as a
        fresh one; re-signing on every 8 MiB range would double the cost of admitting it.
        """
        cached = session.ticket
        if cached is not None and now - session.ticket_issued < TICKET_REUSE_SECONDS:
            return cached
        ticket = self.issue_ticket(session)
        session.ticket = ticket
        session.ticket_issued = now
        return ticket

    def issue_ticket(self, session: Session) -> str | None:
        if self._signer is None:
            return None
        now_ms = max(int(self._clock.wall() * 1000), session.arrival_wall_ms)
        return self._signer.issue(session.key, session.arrival_wall_ms, now_ms)

    # ================================================================ refusals
    def busy_retry_after(self) -> int:
        """An honest wait for a full queue: until about one slot turns over."""
        table = self._table
        rate = self.current_rate().bytes_per_second
        return busy_retry_after(table.waiting_bytes, len(table.queue), rate)

    def reject(self, reason: RejectReason, retry_after: int, cls: DownloadClass | None) -> Rejected:
        rejections = self._counters.rejections
        rejections[reason] = rejections.get(reason, 0) + 1
        return Rejected(reason, retry_after, cls)


def _moved(rate: float, before: float) -> bool:
    """Whether ``rate`` differs from ``before`` by more than 5 %."""
    return abs(rate - before) > 0.05 * before
