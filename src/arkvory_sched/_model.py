"""Values that cross the :class:`DownloadScheduler` port.

Everything here is an immutable value: requests going in, decisions and statistics
coming out. The middleware, the simulation and every implementation of the port speak
only these types, so an implementation can be swapped without touching its callers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from ._classes import DownloadClass, PrincipalKind

__all__ = [
    "Admission",
    "Admitted",
    "ByteRange",
    "ClassStats",
    "ClientKind",
    "Decision",
    "Delivered",
    "DeliveryOutcome",
    "DownloadRequest",
    "EstimateAccuracy",
    "Failed",
    "Grant",
    "HistogramSnapshot",
    "IdleSlots",
    "Interrupted",
    "Queued",
    "RangeKind",
    "RejectReason",
    "Rejected",
    "SchedulerStats",
    "TickReport",
]


class RangeKind(StrEnum):
    """How a request addressed the object; decides whether it sets the download's start.

    ``FULL`` (no Range header) and ``OPEN`` (``bytes=X-``) set the start, ``SUFFIX``
    (``bytes=-N``) never does, and ``BOUNDED`` sets it unless it ends at the last byte
    and does not begin at 0 — that is a tail read such as a ZIP central directory
    (R-SESS-8).
    """

    FULL = "full"
    OPEN = "open"
    BOUNDED = "bounded"
    SUFFIX = "suffix"


# Enum members read on the per-request and per-range paths are bound to module constants
# once, here and in the modules that use them: on Python 3.11 every ``Enum.MEMBER``
# lookup goes through EnumType.__getattr__'s hook (about 150 ns, twenty times a
# global's; ADR 0013).
_FULL, _BOUNDED, _SUFFIX = RangeKind.FULL, RangeKind.BOUNDED, RangeKind.SUFFIX


@dataclass(frozen=True, slots=True)
class ByteRange:
    """A resolved, satisfiable byte range: ``start`` inclusive, ``end`` exclusive."""

    start: int
    end: int
    kind: RangeKind = RangeKind.BOUNDED

    def __post_init__(self) -> None:
        if self.start < 0 or self.end <= self.start:
            raise ValueError(f"empty or negative byte range [{self.start}, {self.end})")

    @property
    def length(self) -> int:
        return self.end - self.start

    @classmethod
    def whole(cls, size: int) -> ByteRange:
        """The range of a request without a Range header."""
        return cls(0, size, _FULL)

    def is_tail_read(self, size: int) -> bool:
        """True when this range does not tell where the download started."""
        kind = self.kind
        if kind is _SUFFIX:
            return True
        return kind is _BOUNDED and self.end >= size and self.start > 0


@dataclass(frozen=True, slots=True, kw_only=True)
class DownloadRequest:
    """One GET of an object, as the host application resolved it after authorization.

    ``download_id`` is the client's ``Arkvory-Download-Id`` (None for third-party tools:
    the session key then falls back to ``client_address``). ``base_class`` overrides the
    default derived from ``principal_kind`` (an operator-set class of a service account,
    R-CLASS-6); ``requested_class`` is the raw ``Arkvory-Download-Class`` header, which
    may only lower it. ``ticket`` is the raw ``Arkvory-Queue-Ticket`` header.
    """

    principal: str
    principal_kind: PrincipalKind
    object_id: str
    object_size: int
    byte_range: ByteRange | None = None
    download_id: str | None = None
    client_address: str = ""
    requested_class: str | None = None
    base_class: DownloadClass | None = None
    ticket: str | None = None

    def __post_init__(self) -> None:
        if self.object_size < 0:
            raise ValueError("object_size must be >= 0")

    @property
    def effective_range(self) -> ByteRange | None:
        """The byte range this request reads (the whole object without a Range header)."""
        if self.byte_range is not None:
            return self.byte_range
        if self.object_size == 0:
            return None
        return ByteRange.whole(self.object_size)


Admission = Literal["session", "per-request"]


@dataclass(frozen=True, slots=True)
class Grant:
    """Proof of admission for one response; hand it back through ``report``.

    ``token`` identifies the grant inside its implementation (a fencing token for the
    PostgreSQL implementation); callers treat it as opaque.
    """

    token: int
    admission: Admission
    download_class: DownloadClass
    byte_range: ByteRange | None
    session_key: bytes = field(default=b"", repr=False)


@dataclass(frozen=True, slots=True)
class Admitted:
    """The response may be sent now."""

    grant: Grant
    ticket: str | None = None

    @property
    def admission(self) -> Admission:
        return self.grant.admission

    @property
    def download_class(self) -> DownloadClass:
        return self.grant.download_class


@dataclass(frozen=True, slots=True)
class Queued:
    """The session waits: answer ``503`` (reason ``download_queued``) with these headers.

    ``position`` is 1-based (``1`` = next). The in-memory store counts a newcomer's
    too; on PostgreSQL it is ``None`` for a newcomer, whose count would race arrivals of
    the same instant, and exact from its first poll (R-EST-3). Times are wall-clock
    epoch seconds.
    ``retry_after`` is whole seconds up to ``check_at``. ``at_the_door``: the server
    holds the request until a slot frees or the hold ends, as it holds a request without
    an id (R-HOLD-2; :func:`~arkvory_sched.policy.held_at_the_door`). ``guessed``: the
    start was estimated on a guess of the link's rate (nothing configured, nothing
    measured yet, ADR 0034 point 3), and the answer says so (ADR 0042): its interval is
    the truth it can tell, and its point is not scored as an estimate.
    """

    position: int | None
    starts_at: float
    starts_earliest: float
    starts_latest: float
    check_at: float
    retry_after: int
    download_class: DownloadClass
    ticket: str | None = None
    reason: str = "download_queued"
    at_the_door: bool = False
    guessed: bool = False


class RejectReason(StrEnum):
    """Why a request was turned away with ``503`` busy (never a failure of the client)."""

    QUEUE_FULL = "queue_full"
    PRINCIPAL_LIMIT = "principal_limit"
    REQUEST_QUEUE_FULL = "request_queue_full"
    REQUEST_WAIT_EXPIRED = "request_wait_expired"
    RANGES_PER_SESSION = "ranges_per_session"
    SHUTTING_DOWN = "shutting_down"
    STORAGE_UNAVAILABLE = "storage_unavailable"


@dataclass(frozen=True, slots=True)
class Rejected:
    """Busy: answer ``503`` with an honest ``Retry-After`` (R-RES-1, R-HOLD-1)."""

    reason: RejectReason
    retry_after: int
    download_class: DownloadClass | None = None


Decision = Admitted | Queued | Rejected


@dataclass(frozen=True, slots=True)
class Delivered:
    """The response was written in full: these bytes count towards completion."""

    byte_range: ByteRange | None


@dataclass(frozen=True, slots=True)
class Interrupted:
    """The client went away or the response was cancelled: no bytes count (R-SESS-8)."""

    bytes_sent: int = 0


@dataclass(frozen=True, slots=True)
class Failed:
    """The application failed while answering: no bytes count, the slot is released."""

    bytes_sent: int = 0


DeliveryOutcome = Delivered | Interrupted | Failed


@dataclass(frozen=True, slots=True)
class HistogramSnapshot:
    """Cumulative histogram in Prometheus shape: ``counts[i]`` observations ≤ ``bounds[i]``."""

    bounds: tuple[float, ...]
    counts: tuple[int, ...]
    count: int
    total: float


_NO_OBSERVATIONS = HistogramSnapshot((), (), 0, 0.0)


class ClientKind(StrEnum):
    """Which kind of client waited, for the accuracy of its estimates (issue #28).

    ``PROTOCOL`` clients send an ``Arkvory-Download-Id`` (the SDK, ``arkvoryctl``) and
    follow ``checkAt``; ``THIRD_PARTY`` tools send none (curl, wget, a browser, a
    package manager) and retry on ``Retry-After`` alone. Their waits are scored apart,
    so an operator sees when one kind is misled while the other is told the truth.
    """

    PROTOCOL = "protocol"
    THIRD_PARTY = "third_party"

    @classmethod
    def of(cls, has_id: bool) -> ClientKind:
        """The kind of a session's client: whether it sent a download id."""
        return _PROTOCOL if has_id else _THIRD_PARTY


_PROTOCOL, _THIRD_PARTY = ClientKind.PROTOCOL, ClientKind.THIRD_PARTY


@dataclass(frozen=True, slots=True)
class EstimateAccuracy:
    """How true the announced start times were, one score per wait (R-EST-4).

    ``signed_error_seconds`` is actual minus announced start (negative: started early),
    ``relative_error`` the absolute error over the announced wait, ``inside_interval``
    how many starts fell inside the interval announced with the estimate, and
    ``absolute_error_seconds`` the absolute error (for all waits it is also
    :attr:`SchedulerStats.estimate_error_seconds`).
    """

    signed_error_seconds: HistogramSnapshot
    relative_error: HistogramSnapshot
    inside_interval: int
    absolute_error_seconds: HistogramSnapshot = _NO_OBSERVATIONS

    @property
    def scored(self) -> int:
        return self.signed_error_seconds.count

    @property
    def share_inside(self) -> float | None:
        """The share of scored starts inside their interval; ``None`` before any."""
        return self.inside_interval / self.scored if self.scored else None


@dataclass(frozen=True, slots=True)
class ClassStats:
    """Aggregates of one priority class; no ids of any kind (R-VIS-4)."""

    waiting: int
    active: int
    paused: int
    oldest_wait_seconds: float
    bytes_delivered: int
    wait_seconds: HistogramSnapshot


NO_ESTIMATES = EstimateAccuracy(_NO_OBSERVATIONS, _NO_OBSERVATIONS, 0)
"""The accuracy of a scheduler that has scored no wait yet."""


def _no_estimates_by_client() -> dict[ClientKind, EstimateAccuracy]:
    return dict.fromkeys(ClientKind, NO_ESTIMATES)


@dataclass(frozen=True, slots=True)
class SlotSizingState:
    """Self-sizing slots (issue #30, ADR 0038): the operator's bounds and why the count
    in force (``SchedulerStats.sessions_limit``) is where it is. ``reason`` is one of
    ``start``, ``spare-link``, ``clients-limited``, ``probing``, ``saturated``,
    ``slots-unused``, ``at-maximum``, ``at-minimum``; ``None`` on a PostgreSQL process
    before the leader published one."""

    minimum: int
    maximum: int
    reason: str | None


@dataclass(frozen=True, slots=True)
class IdleSlots:
    """Slots left free while someone waits (issue #28), integrated over queue time.

    ``slots`` is how many free slots a waiter could take now: ``sessions`` minus the
    active sessions while at least one session waits, counting the interactive reserve
    only for a waiting interactive session (R-CLASS-3) and a class outside its windows
    only within the slots it may still take (R-WIN-2); 0 when nobody waits.
    ``slot_seconds`` is its integral since the scheduler started (two idle slots for a
    second are two slot-seconds). A *stretch* is a span during which ``slots`` stays
    above 0: ``stretch_seconds`` is the current one's length so far, or the last one's
    once it ended; ``longest_stretch_seconds`` the longest since the start.

    The in-memory store integrates exactly, at every change of the counts. On
    PostgreSQL the leader samples the shared queue on each tick (about once a second)
    and stores the figures with the queue's state, so every process reports the same
    numbers, as of the leader's last tick.
    """

    slots: int = 0
    slot_seconds: float = 0.0
    stretch_seconds: float = 0.0
    longest_stretch_seconds: float = 0.0


NO_IDLE_SLOTS = IdleSlots()
"""The idle slots of a scheduler that has never left a slot free while someone waited."""


@dataclass(frozen=True, slots=True)
class SchedulerStats:
    """Everything metrics and readiness need, as aggregates (R-VIS-3, R-VIS-4)."""

    strategy: str
    admission: Admission
    sessions_limit: int
    per_class: dict[DownloadClass, ClassStats]
    request_active: int
    request_waiting: int
    admitted_total: int
    completed_total: int
    no_shows_total: int
    idle_releases_total: int
    preemptions_total: int
    rejections_total: dict[RejectReason, int]
    estimate_error_seconds: HistogramSnapshot
    last_tick_seconds: float
    delivery_rate: float
    queue_empty_in_seconds: float | None
    closed: bool
    estimate_accuracy: EstimateAccuracy = NO_ESTIMATES
    estimate_accuracy_by_client: dict[ClientKind, EstimateAccuracy] = field(
        default_factory=_no_estimates_by_client
    )
    """The accuracy of :attr:`estimate_accuracy` split by the kind of client that
    waited; every kind is present, and the kinds add up to the total."""
    idle_slots: IdleSlots = NO_IDLE_SLOTS
    """Slots left free while someone waited; fleet-wide (see :class:`IdleSlots`)."""
    slot_sizing: SlotSizingState | None = None
    """The self-sizing slots' bounds and reason; ``None`` while the count is fixed."""
    reports_fleet_figures: bool = True
    """Whether this snapshot's fleet-wide figures (sessions per class and state, the
    session totals, the forecast) are this process's to export. A store shared by many
    processes sets it on one of them only (the PostgreSQL leader), so a sum over the
    processes counts each fleet-wide figure once."""

    @property
    def waiting(self) -> int:
        return sum(stats.waiting for stats in self.per_class.values())

    @property
    def active(self) -> int:
        return sum(stats.active for stats in self.per_class.values())

    @property
    def paused(self) -> int:
        return sum(stats.paused for stats in self.per_class.values())


@dataclass(frozen=True, slots=True)
class TickReport:
    """What one tick did and when the next should run (R-RES-2)."""

    duration: float
    next_tick_in: float
    expired: int
    marked: int
    preempted: bool
