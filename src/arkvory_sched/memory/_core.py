"""The pure scheduling core: sessions, slots, queue, estimates — no I/O, no sleeps.

Rules of this file and of the parts it assembles:

* Time comes from the injected :class:`Clock` and nowhere else; the queue runs on its
  monotonic side, tickets and announced start times on its wall side (R-RES-5).
* Every public method finishes in O(log n) of the waiting count, except ``tick`` which is
  proportional to what changed (expirations, promotions, marks) plus the active slots,
  and ``configure`` when it must re-key the queue for another strategy.
* Nothing grows without a bound: a request beyond a limit is answered ``Rejected``.

The rules it applies — order, eligibility, marks, preemption, estimates — are the
policy's (:mod:`arkvory_sched.policy`, ADR 0016). :class:`SchedulerCore` is a facade:
it builds the parts (see the package docstring), hands each what it uses, and passes
each call to the part whose job it is. The async :class:`InMemoryDownloadScheduler`
wraps it; the simulation and the hypothesis state machine drive it directly.
"""

from __future__ import annotations

import dataclasses

from .._classes import DownloadClass, PrincipalKind
from .._clock import Clock
from .._early_polls import EarlyPolls
from .._grant_state import GrantState
from .._model import (
    Admitted,
    ByteRange,
    Decision,
    DeliveryOutcome,
    DownloadRequest,
    Grant,
    HistogramSnapshot,
    Rejected,
    SchedulerStats,
    SlotSizingState,
)
from .._own_downloads import OWN_DOWNLOADS_LIMIT, OwnDownloads
from .._queue_state import QueueState
from .._rate import PeakRateMeter
from .._request_admission import PendingRequest, RequestAdmission
from .._slot_sizer import SlotSizer
from .._tickets import TicketSigner
from ..policy import SizingReading, StartEstimate, held_pace, sizing_reading
from ..settings import SchedulerSettings
from ._admission import Admission
from ._answers import Answers
from ._counters import Counters
from ._delivery import Delivery
from ._own_downloads import downloads_of
from ._queue_state import queue_state_of
from ._session import Session
from ._slots import Slots
from ._statistics import Statistics
from ._table import SessionTable
from ._tick import Tick, TickOutcome

__all__ = ["GrantState", "PendingRequest", "SchedulerCore", "TickOutcome"]


class SchedulerCore:
    """Deterministic download-session scheduler (the in-memory implementation's brain)."""

    __slots__ = ("_admission", "_answers", "_clock", "_counters", "_delivery", "_early",
                 "_grants", "_requests", "_sizer", "_slots", "_statistics", "_table",
                 "_tick")  # fmt: skip

    def __init__(
        self,
        settings: SchedulerSettings,
        clock: Clock,
        signer: TicketSigner | None = None,
    ) -> None:
        self._clock = clock
        # Under automatic sizing the parts run on the settings in force (ADR 0038).
        sizer = self._sizer = SlotSizer(settings, clock.monotonic())
        settings = sizer.in_force()
        counters = self._counters = Counters()
        early = self._early = EarlyPolls()  # early polls answered without a decision (ADR 0029)
        rate = PeakRateMeter()
        grants: dict[int, GrantState[Session]] = {}
        self._grants = grants
        # Per-request places (small objects, shared): the component both stores use.
        requests = self._requests = RequestAdmission(
            settings, clock, rate=rate, bytes_by_class=counters.bytes_by_class
        )
        table = self._table = SessionTable(settings, clock, early=early, counters=counters)
        slots = self._slots = Slots(settings, clock, table=table)
        answers = self._answers = Answers(
            settings,
            clock,
            signer,
            table=table,
            slots=slots,
            rate=rate,
            early=early,
            counters=counters,
            sizer=sizer,
        )
        self._admission = Admission(
            settings,
            clock,
            signer,
            table=table,
            slots=slots,
            answers=answers,
            requests=requests,
            early=early,
            grants=grants,
            counters=counters,
        )
        self._delivery = Delivery(
            clock,
            table=table,
            requests=requests,
            grants=grants,
            rate=rate,
            bytes_by_class=counters.bytes_by_class,
        )
        self._tick = Tick(
            settings, clock, table=table, slots=slots, answers=answers, counters=counters
        )
        self._statistics = Statistics(
            settings, clock, table=table, answers=answers, requests=requests, counters=counters
        )

    # ================================================================ parts
    @property
    def admission(self) -> Admission:
        """The admission part; the async wrapper calls its fast path directly."""
        return self._admission

    @property
    def delivery(self) -> Delivery:
        """The delivery part; the async wrapper reports the fast path's ranges to it."""
        return self._delivery

    @property
    def requests(self) -> RequestAdmission:
        """The per-request places; the async wrapper waits on them."""
        return self._requests

    @property
    def table(self) -> SessionTable:
        """The session table, read by tests that check an index directly."""
        return self._table

    # ================================================================ control
    @property
    def settings(self) -> SchedulerSettings:
        return self._table.settings

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def closed(self) -> bool:
        return self._table.closed

    def configure(self, settings: SchedulerSettings) -> None:
        """Apply from the next decision on; env-only fields keep their start-up values.

        Every part that reads the settings is handed the new ones here, at once."""
        settings = settings.keeping_environment_only(self._table.settings)
        self._apply(self._sizer.configure(settings, self._clock.monotonic()))

    @property
    def sizer(self) -> SlotSizer:
        """The self-sizing slots: the operator's settings and the count in force."""
        return self._sizer

    def _apply(self, settings: SchedulerSettings) -> None:
        """Run every part on ``settings`` from the next decision on."""
        self._early.clear()  # the next poll of every waiter is decided anew (R-STRAT-4)
        self._table.configure(settings)
        self._slots.settings = settings
        self._answers.settings = settings
        self._admission.configure(settings)
        self._tick.settings = settings
        self._statistics.settings = settings

    def close(self) -> list[int]:
        """Stop admitting new work; returns per-request waiters to wake with a refusal."""
        self._table.closed = True
        return self._requests.close()

    # ================================================================ admission
    def admit(self, request: DownloadRequest) -> Decision | PendingRequest:
        """Decide one GET (see ``DownloadScheduler.admit``); never blocks."""
        return self._admission.admit(request)

    def admit_now(
        self,
        principal: str,
        principal_kind: PrincipalKind,
        base_class: DownloadClass | None,
        requested_class: str | None,
        download_id: str | None,
        object_id: str,
        object_size: int,
        client_address: str,
        byte_range: ByteRange | None,
    ) -> GrantState[Session] | None:
        """The fast path of :meth:`admit` (see :meth:`Admission.admit_now`)."""
        return self._admission.admit_now(
            principal,
            principal_kind,
            base_class,
            requested_class,
            download_id,
            object_id,
            object_size,
            client_address,
            byte_range,
        )

    def grant_per_request(self, cls: DownloadClass, byte_range: ByteRange | None) -> Admitted:
        """Issue a grant for a per-request place already counted as taken."""
        return self._requests.grant(cls, byte_range)

    def cancel_pending(self, pending: PendingRequest) -> Rejected | None:
        """The wait for a per-request place ran out. None if it was promoted meanwhile."""
        return self._requests.cancel(pending)

    # ================================================================ delivery
    def report(self, grant: Grant, outcome: DeliveryOutcome) -> list[int]:
        """Record how a response ended. Returns per-request waiters promoted into places."""
        return self._delivery.report(grant, outcome)

    def report_state(self, state: GrantState[Session], outcome: DeliveryOutcome) -> list[int]:
        """:meth:`report` for a grant of :meth:`admit_now`; a second call is a no-op."""
        return self._delivery.report_state(state, outcome)

    def release_per_request(self, state: GrantState[Session], sent: int) -> list[int]:
        """Give back a place of :meth:`admit_now` after ``sent`` bytes.

        What :meth:`report` does for a per-request grant: ``sent`` is the byte count
        a ``Delivered`` outcome stands for (the whole object, or the granted range), or
        the bytes sent before an interruption or failure. A second call is a no-op.
        Returns the per-request waiters promoted into the freed place.
        """
        return self._requests.release(state, sent)

    def progress(self, grant: Grant, nbytes: int) -> None:
        self._delivery.progress(grant, nbytes)

    def progress_per_request(self, state: GrantState[Session], nbytes: int) -> None:
        """:meth:`progress` for a place or range of :meth:`admit_now`."""
        self._delivery.progress_per_request(state, nbytes)

    # ================================================================ tick
    def tick(self) -> TickOutcome:
        """Size the slots, expire, release idle slots, age, preempt, mark; see the
        rules of this file."""
        if self._sizer.state is not None:
            moved = self._sizer.step(self._sizing_reading())
            if moved is not None:
                self._apply(moved)
        return self._tick.tick()

    def _sizing_reading(self) -> SizingReading:
        """What the self-sizing slots read at a tick (ADR 0038): the queue, the link's
        last seconds and capacity, and the held slots' sessions' rates."""
        table, now = self._table, self._clock.monotonic()
        paces = [
            held_pace(session.sent_bytes(), session.slot_since, now)
            for session in table.active.values()
        ]
        delivery, since = self._answers.recent_delivery(now)
        return sizing_reading(
            now,
            waiting=len(table.queue),
            paces=paces,
            delivery=delivery,
            delivery_since=since,
            rate=self._answers.current_rate(),
            carried=self._answers.provisional_rate(now),
            capacity_told=self._sizer.configured.bandwidth is not None,
        )

    def record_tick_duration(self, seconds: float) -> None:
        self._counters.last_tick_seconds = seconds

    @property
    def last_tick_seconds(self) -> float:
        return self._counters.last_tick_seconds

    # ================================================================ reading
    def stats(self) -> SchedulerStats:
        stats = self._statistics.stats()
        state, configured = self._sizer.state, self._sizer.configured
        if state is None or configured.min_sessions is None:
            return stats
        sizing = SlotSizingState(configured.min_sessions, configured.sessions, state.reason.value)
        return dataclasses.replace(stats, slot_sizing=sizing)

    def estimate_error(self) -> HistogramSnapshot:
        return self._statistics.estimate_error()

    def estimate(self, session: Session, now: float) -> StartEstimate:
        """A waiting session's place and start as its next poll computes them."""
        return self._answers.estimate(session, now)

    def queue_state(self) -> QueueState:
        """The operator's view now (see :class:`QueueState`)."""
        return queue_state_of(self._table, self._statistics.stats(), self._clock)

    def downloads_of(self, principal: str, limit: int = OWN_DOWNLOADS_LIMIT) -> OwnDownloads:
        """The downloads of ``principal`` now (see :class:`OwnDownloads`)."""
        return downloads_of(self._table, self._answers, self._clock, principal, limit)

    # ================================================================ introspection
    def debug_invariants(self) -> list[str]:
        """Structural checks for tests; O(n). Returns the violated invariants."""
        return self._table.debug_invariants()

    @property
    def active_count(self) -> int:
        return len(self._table.active)

    @property
    def waiting_count(self) -> int:
        return len(self._table.queue)

    @property
    def session_count(self) -> int:
        return len(self._table.sessions)

    def grants_in_flight(self) -> int:
        return len(self._grants) + self._requests.in_flight

    def principal_active(self, principal: str) -> int:
        record = self._table.principals.get(principal)
        return 0 if record is None else record.active

    def contenders_waiting(self) -> int:
        return self._table.under_share_waiting

    def active_noninteractive(self) -> int:
        return len(self._table.active) - self._table.active_interactive
