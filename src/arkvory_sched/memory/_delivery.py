"""Recording how a response went: progress, delivered ranges, completion.

Per-request places are ended by the per-request component; a session's range is ended
here, which counts its bytes (the delivery rate behind the estimates and the per-class
byte counters), judges where the download starts (R-SESS-8), and completes the session
in the table once every byte from its start to the end has been delivered.
"""

from __future__ import annotations

from .._clock import Clock
from .._grant_state import GrantState
from .._model import (
    Delivered,
    DeliveryOutcome,
    Grant,
)
from .._rate import PeakRateMeter
from .._request_admission import RequestAdmission
from ..policy import sets_start
from ._intervals import DeliveredRanges
from ._session import GONE, Session
from ._table import SessionTable

__all__ = ["Delivery"]


class Delivery:
    """The delivery path of the in-memory store (``report`` and ``progress``).

    ``grants`` is the map of session grants in flight that the admission fills;
    ``rate`` and ``bytes_by_class`` are the meter and byte counters every response
    feeds, the per-request ones included. It keeps no ``__slots__``, so that a test
    may wrap ``report_state`` on one instance and see every session outcome.
    """

    def __init__(
        self,
        clock: Clock,
        *,
        table: SessionTable,
        requests: RequestAdmission,
        grants: dict[int, GrantState[Session]],
        rate: PeakRateMeter,
        bytes_by_class: list[int],
    ) -> None:
        self._clock = clock
        self._table = table
        self._requests = requests
        self._grants = grants
        self._rate = rate
        self._bytes_by_class = bytes_by_class

    def report(self, grant: Grant, outcome: DeliveryOutcome) -> list[int]:
        """Record how a response ended. Returns per-request waiters promoted into places."""
        if grant.admission == "per-request":
            return self._requests.report(grant, outcome)
        state = self._grants.get(grant.token)
        if state is None:
            return []
        return self.report_state(state, outcome)

    def report_state(self, state: GrantState[Session], outcome: DeliveryOutcome) -> list[int]:
        """:meth:`report` for a range of ``admit_now`` (any grant state); a second call is a
        no-op."""
        session = state.session
        if session is None:
            return self._requests.report_state(state, outcome)
        if self._grants.pop(state.token, None) is None:
            return []
        now = self._clock.monotonic()
        if isinstance(outcome, Delivered):
            counted = outcome.byte_range or state.byte_range
            sent = counted.length if counted is not None else 0
        else:
            counted = None
            sent = outcome.bytes_sent
        self._record_bytes(state, max(0, sent - state.progressed), now)
        # Its bytes in flight leave with it: a delivered range counts them below, an
        # interrupted response's are dropped (issue #28).
        session.bytes_in_flight = max(0, session.bytes_in_flight - state.progressed)
        session.in_flight = max(0, session.in_flight - 1)
        if counted is None and not session.in_flight:
            # Cancelled or failed with nothing else in flight: hold the slot only as
            # long as a tail read, so a client that gave up does not idle it for 30 s.
            session.interrupted = True
        session.last_activity = now
        if counted is not None:
            # Judged when the range arrives, after the ranges before it: a dropped first
            # request must not pin the start below where a resuming client continues,
            # and a read walking back from the tail may be admitted before the read it
            # follows is reported (R-SESS-8).
            delivered = session.delivered
            last = None if delivered is None else delivered.last()
            if sets_start(state.byte_range, session.object_size, last):
                known = session.start_offset
                offset = counted.start
                session.start_offset = offset if known is None else min(known, offset)
            if session.delivered is None:
                session.delivered = DeliveredRanges()
            session.delivered.add(counted.start, counted.end)
        if session.state is not GONE and session.is_complete():
            self._table.complete(session)
        return []

    def progress(self, grant: Grant, nbytes: int) -> None:
        if grant.admission == "per-request":
            self._requests.progress(grant, nbytes)
            return
        state = self._grants.get(grant.token)
        if state is not None:
            self.progress_per_request(state, nbytes)

    def progress_per_request(self, state: GrantState[Session], nbytes: int) -> None:
        """:meth:`progress` for a place or range of ``admit_now`` (or any grant state)."""
        session = state.session
        if session is None:
            self._requests.progress_state(state, nbytes)
            return
        if nbytes <= 0 or state.token not in self._grants:
            return
        now = self._clock.monotonic()
        self._record_bytes(state, nbytes, now)
        state.progressed += nbytes
        # Counted at once towards what the estimates, the queue state and the person's
        # page see as sent (issue #28); the response's report replaces it.
        session.bytes_in_flight += nbytes
        session.last_activity = now

    def _record_bytes(self, state: GrantState[Session], nbytes: int, now: float) -> None:
        if nbytes <= 0:
            return
        self._rate.record(state.last_progress, now, nbytes)
        state.last_progress = now
        self._bytes_by_class[state.download_class.rank] += nbytes
