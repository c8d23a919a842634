"""The pure scheduling core: sessions, slots, queue, estimates — no I/O, no sleeps.

Rules of this file:

* Time comes from the injected :class:`Clock` and nowhere else; the queue runs on its
  monotonic side, tickets and announced start times on its wall side (R-RES-5).
* Every public method finishes in O(log n) of the waiting count, except ``tick`` which is
  proportional to what changed (expirations, promotions, marks) plus the active slots,
  and ``configure`` when it must re-key the queue for another strategy.
* Nothing grows without a bound: a request beyond a limit is answered ``Rejected``.

The rules it applies — order, eligibility, marks, preemption, estimates — are the
policy's (:mod:`arkvory_sched.policy`, ADR 0016): this class gathers their inputs from
its live structures and applies the results. The async :class:`InMemoryDownloadScheduler`
wraps this class; the simulation and the hypothesis state machine drive it directly.
"""

from __future__ import annotations

import itertools

from .._classes import DownloadClass
from .._grant_state import GrantState
from .._model import (
    ClassStats,
    HistogramSnapshot,
    RejectReason,
    SchedulerStats,
)
from .._request_admission import PendingRequest
from ..policy import CLASS_COUNT
from ..settings import SchedulerSettings
from ._core_admission import CoreAdmission
from ._core_delivery import CoreDelivery
from ._core_state import _ACTIVE, _PAUSED, _SHARED, _WAITING, TickOutcome, ages_of
from ._core_tick import CoreTick

__all__ = ["GrantState", "PendingRequest", "SchedulerCore", "TickOutcome"]


class SchedulerCore(CoreAdmission, CoreDelivery, CoreTick):
    """Deterministic download-session scheduler (the in-memory implementation's brain)."""

    # ================================================================ control
    def configure(self, settings: SchedulerSettings) -> None:
        """Apply from the next decision on; env-only fields keep their start-up values."""
        settings = settings.keeping_environment_only(self._settings)
        self._settings = settings
        self._early.clear()  # the next poll of every waiter is decided anew (R-STRAT-4)
        self._queue.reconfigure(
            settings.strategy, settings.weights, settings.aging_minutes * 60, ages_of(settings)
        )
        self._under_share_waiting = sum(
            principal.waiting
            for principal in self._principals.values()
            if principal.active < settings.per_principal
        )
        stop = not settings.preempt or settings.strategy is _SHARED
        if stop and self._pending_yield is not None:
            self._pending_yield.yield_requested = False
            self._pending_yield.blocked_by = None
            self._pending_yield = None
        self._mark_epoch += 1

    def close(self) -> list[int]:
        """Stop admitting new work; returns per-request waiters to wake with a refusal."""
        self._closed = True
        return self._requests.close()

    # ================================================================ stats
    def stats(self) -> SchedulerStats:
        now = self._clock.monotonic()
        per_class: dict[DownloadClass, ClassStats] = {}
        for rank in range(CLASS_COUNT):
            cls = DownloadClass.by_rank(rank)
            oldest = self._queue.oldest_waiting_since(rank)
            per_class[cls] = ClassStats(
                waiting=self._by_class_waiting[rank],
                active=self._by_class_active[rank],
                paused=self._by_class_paused[rank],
                oldest_wait_seconds=0.0 if oldest is None else max(0.0, now - oldest),
                bytes_delivered=self._bytes_by_class[rank],
                wait_seconds=self._wait_histograms[rank].snapshot(),
            )
        empty_in: float | None = None
        if self._queue:
            rate = self._current_rate()
            active_bytes = sum(session.remaining_bytes() for session in self._active.values())
            empty_in = (self._waiting_bytes + active_bytes) / rate
        settings = self._settings
        return SchedulerStats(
            strategy=settings.strategy.value,
            admission="per-request" if settings.strategy is _SHARED else "session",
            sessions_limit=settings.sessions,
            per_class=per_class,
            request_active=self._requests.active,
            request_waiting=self._requests.waiting,
            admitted_total=self._counters.admitted + self._requests.admitted,
            completed_total=self._counters.completed,
            no_shows_total=self._counters.no_shows,
            idle_releases_total=self._counters.idle_releases,
            preemptions_total=self._counters.preemptions,
            rejections_total=_merged(self._counters.rejections, self._requests.rejections),
            estimate_error_seconds=self._estimates.absolute().snapshot(),
            estimate_accuracy=self._estimates.accuracy(),
            last_tick_seconds=self._last_tick_seconds,
            delivery_rate=self._current_rate(),
            queue_empty_in_seconds=empty_in,
            closed=self._closed,
        )

    def estimate_error(self) -> HistogramSnapshot:
        return self._estimates.absolute().snapshot()

    # ================================================================ introspection
    def debug_invariants(self) -> list[str]:
        """Structural checks for tests; O(n). Returns the violated invariants."""
        problems: list[str] = []
        states = [s.state for s in self._sessions.values()]
        if states.count(_ACTIVE) != len(self._active):
            problems.append("active index out of sync")
        if states.count(_WAITING) != len(self._queue):
            problems.append("waiting index out of sync")
        if sum(self._by_class_waiting) != len(self._queue):
            problems.append("per-class waiting counters out of sync")
        if sum(self._by_class_active) != len(self._active):
            problems.append("per-class active counters out of sync")
        if sum(self._by_class_paused) != states.count(_PAUSED):
            problems.append("per-class paused counters out of sync")
        interactive = sum(1 for s in self._active.values() if s.interactive)
        if interactive != self._active_interactive:
            problems.append("interactive counter out of sync")
        share = self._settings.per_principal
        expected_under = sum(p.waiting for p in self._principals.values() if p.active < share)
        if expected_under != self._under_share_waiting:
            problems.append("under-share waiting counter out of sync")
        for principal in self._principals.values():
            owned = [s for s in self._sessions.values() if s.principal is principal]
            if len(owned) != principal.sessions:
                problems.append(f"principal session count out of sync ({principal.sessions})")
            if list(principal.owned) != owned:
                problems.append("principal's own sessions out of sync")
            if sum(s.state is _WAITING for s in owned) != principal.waiting:
                problems.append("principal waiting count out of sync")
            if sum(s.state is _ACTIVE for s in owned) != principal.active:
                problems.append("principal active count out of sync")
        for session in self._sessions.values():
            if session.delivered is not None:
                spans = session.delivered.intervals()
                if len(spans) > 64:
                    problems.append("more than 64 delivered intervals")
                for (_, end), (start, _) in itertools.pairwise(spans):
                    if start <= end:
                        problems.append("delivered intervals overlap or touch")
        return problems

    def grants_in_flight(self) -> int:
        return len(self._grants) + self._requests.in_flight

    def principal_active(self, principal: str) -> int:
        record = self._principals.get(principal)
        return 0 if record is None else record.active

    def contenders_waiting(self) -> int:
        return self._under_share_waiting

    def active_noninteractive(self) -> int:
        return len(self._active) - self._active_interactive


def _merged(
    first: dict[RejectReason, int], second: dict[RejectReason, int]
) -> dict[RejectReason, int]:
    """The rejection counts of the session path and of the per-request places, added up."""
    merged = dict(first)
    for reason, count in second.items():
        merged[reason] = merged.get(reason, 0) + count
    return merged
