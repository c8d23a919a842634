"""What the in-memory core knows: its live structures and counters, built once.

Every part of :class:`SchedulerCore` (admission, delivery, tick, estimates, the
transitions between session states) works on these attributes; this class only
creates them and answers the plain read-only questions about them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .._clock import Clock
from .._early_polls import EarlyPolls
from .._grant_state import GrantState
from .._model import RejectReason
from .._rate import PeakRateMeter
from .._request_admission import RequestAdmission
from .._session_keys import SessionKeys
from .._tickets import TicketSigner
from ..measures import EstimateScorer, Histogram
from ..policy import CLASS_COUNT, ClassGate, class_ages
from ..settings import SchedulerSettings, Strategy
from ._deadlines import DeadlineBuckets
from ._fairqueue import FairQueue
from ._session import PrincipalRecord, Session, SessionState

__all__ = ["CoreState", "TickOutcome", "ages_of"]

# Enum members bound once (why: _model.py, next to RangeKind).
_WAITING, _ACTIVE = SessionState.WAITING, SessionState.ACTIVE
_PAUSED, _GONE = SessionState.PAUSED, SessionState.GONE
_SHARED = Strategy.SHARED


def ages_of(settings: SchedulerSettings) -> list[bool]:
    """Per base class, whether its waiters age: not a class with windows (ADR 0021)."""
    return [class_ages(settings.class_windows, rank) for rank in range(CLASS_COUNT)]


@dataclass(frozen=True, slots=True)
class TickOutcome:
    expired: int
    idle_released: int
    promoted: int
    marked: int
    preempted: bool


@dataclass(slots=True)
class _Counters:
    admitted: int = 0
    completed: int = 0
    no_shows: int = 0
    idle_releases: int = 0
    preemptions: int = 0
    rejections: dict[RejectReason, int] = field(default_factory=dict)


class CoreState:
    """The shared state of :class:`SchedulerCore`; the other parts add behaviour."""

    def __init__(
        self,
        settings: SchedulerSettings,
        clock: Clock,
        signer: TicketSigner | None = None,
    ) -> None:
        self._settings = settings
        self._clock = clock
        self._signer = signer
        self._queue = FairQueue(settings.strategy, settings.weights, settings.aging_minutes * 60)
        self._queue.reconfigure(
            settings.strategy, settings.weights, settings.aging_minutes * 60, ages_of(settings)
        )
        # The windows' verdict (R-WIN-2), kept until a class opens or closes.
        self._gate: ClassGate | None = None
        self._sessions: dict[bytes, Session] = {}
        self._keys = SessionKeys()
        self._early = EarlyPolls()  # early polls answered without a decision (ADR 0029)
        self._principals: dict[str, PrincipalRecord] = {}
        self._active: dict[bytes, Session] = {}
        self._active_interactive = 0
        self._grants: dict[int, GrantState] = {}
        self._next_token = 0
        self._seq = 0
        self._deadlines = DeadlineBuckets(clock.monotonic())
        self._mark_epoch = 0
        self._free_at_mark = 0
        self._last_release = -math.inf
        self._under_share_waiting = 0
        self._pending_yield: Session | None = None
        self._rate = PeakRateMeter()
        self._last_rate = 0.0
        self._waiting_bytes = 0
        self._finish_table: list[float] = []
        self._finish_table_at = -math.inf
        self._by_class_waiting = [0] * CLASS_COUNT
        self._by_class_active = [0] * CLASS_COUNT
        self._by_class_paused = [0] * CLASS_COUNT
        self._bytes_by_class = [0] * CLASS_COUNT
        self._wait_histograms = [Histogram() for _ in range(CLASS_COUNT)]
        self._estimates = EstimateScorer()
        # Per-request places (small objects, shared): the component both stores use.
        self._requests = RequestAdmission(
            settings, clock, rate=self._rate, bytes_by_class=self._bytes_by_class
        )
        self._counters = _Counters()
        self._last_tick_seconds = 0.0
        self._closed = False

    # ================================================================ properties
    @property
    def settings(self) -> SchedulerSettings:
        return self._settings

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def requests(self) -> RequestAdmission:
        """The per-request places; the async wrapper waits on them."""
        return self._requests

    @property
    def active_count(self) -> int:
        return len(self._active)

    @property
    def waiting_count(self) -> int:
        return len(self._queue)

    @property
    def session_count(self) -> int:
        return len(self._sessions)
