"""Per-session and per-principal records of the pure core.

Plain mutable records with ``__slots__``: up to a million waiting sessions must fit in
about 1 KiB each, so nothing here allocates per-session containers until it needs them
(a waiting session has no delivered-range list). The session key they are filed under
is shared with the PostgreSQL store and lives in :mod:`arkvory_sched._session_keys`.
"""

from __future__ import annotations

from enum import IntEnum

from .._classes import DownloadClass
from .._model import ByteRange
from ..policy import sets_start
from ._intervals import DeliveredRanges

__all__ = [
    "ACTIVE",
    "GONE",
    "PAUSED",
    "WAITING",
    "PrincipalRecord",
    "Session",
    "SessionState",
]


class SessionState(IntEnum):
    WAITING = 0
    ACTIVE = 1
    PAUSED = 2
    GONE = 3


# The members bound once as module constants: on Python 3.11 every ``SessionState.X``
# lookup takes the enum's slow ``__getattr__`` hook, and the request paths read them
# (ADR 0013).
WAITING, ACTIVE = SessionState.WAITING, SessionState.ACTIVE
PAUSED, GONE = SessionState.PAUSED, SessionState.GONE


class PrincipalRecord:
    """Counters of one principal: bounds, share and round-robin position per class."""

    __slots__ = ("active", "last_tags", "name", "owned", "sessions", "waiting")

    def __init__(self, name: str) -> None:
        self.name = name
        self.sessions = 0
        self.waiting = 0
        self.active = 0
        self.last_tags = [0, 0, 0, 0]
        # The principal's sessions in arrival order (a dict used as an ordered set), so
        # that its own downloads are found without walking everyone's (issue #19).
        self.owned: dict[Session, None] = {}


class Session:
    """One download of one object by one client."""

    __slots__ = (
        "aging_since",
        "arrival",
        "arrival_wall_ms",
        "back_at",
        "base_class",
        "blocked_by",
        "bytes_in_flight",
        "check_at",
        "delivered",
        "download_id",
        "entry",
        "expiry_bucket",
        "first_estimate",
        "first_estimate_at",
        "has_id",
        "in_flight",
        "interrupted",
        "key",
        "last_activity",
        "mark",
        "mark_backup",
        "no_show_at",
        "object_id",
        "object_size",
        "paused_until",
        "principal",
        "queue_rank",
        "seq",
        "slot_since",
        "start_hint",
        "start_offset",
        "state",
        "ticket",
        "ticket_issued",
        "waiting_since",
        "yield_requested",
    )

    def __init__(
        self,
        *,
        key: bytes,
        principal: PrincipalRecord,
        object_size: int,
        base_class: DownloadClass,
        has_id: bool,
        arrival: float,
        arrival_wall_ms: int,
        seq: int,
        object_id: str = "",
        download_id: str | None = None,
    ) -> None:
        self.key = key
        # Only the principal's own downloads page reads these two (issue #19).
        self.object_id = object_id
        self.download_id = download_id
        self.principal = principal
        self.object_size = object_size
        self.base_class = base_class
        self.has_id = has_id
        self.arrival = arrival
        self.arrival_wall_ms = arrival_wall_ms
        self.seq = seq
        self.state = SessionState.GONE
        self.queue_rank = base_class.rank
        self.entry: tuple[float, float, int, Session] | None = None
        self.aging_since = arrival
        self.waiting_since = arrival
        self.check_at = arrival
        # When its last answer's Retry-After brings it back: whole seconds, so up to a
        # second after check_at (whether it keeps its turn, policy.keeps_its_turn).
        self.back_at = arrival
        self.no_show_at = arrival
        self.expiry_bucket: int | None = None
        self.mark = -1
        self.mark_backup = False
        self.blocked_by: Session | None = None
        self.first_estimate: float | None = None
        self.first_estimate_at = 0.0  # when first_estimate was announced
        self.slot_since = 0.0
        self.in_flight = 0
        # What the responses still running have sent so far (their progress reports):
        # no longer to send, though not yet a delivered range (issue #28).
        self.bytes_in_flight = 0
        self.interrupted = False
        self.last_activity = arrival
        self.start_offset: int | None = None
        # Where its requests say the download starts, before a delivered range does
        # (R-SESS-8 waits for that): a resume's one long response is half the object,
        # and counting it whole put the slot's end seconds late (issue #28).
        self.start_hint: int | None = None
        self.delivered: DeliveredRanges | None = None
        self.yield_requested = False
        self.ticket: str | None = None
        self.ticket_issued = 0.0
        self.paused_until = 0.0

    @property
    def interactive(self) -> bool:
        return self.base_class is DownloadClass.INTERACTIVE

    # What the policy's ``choose_victim`` reads of a holder (``policy.YieldHolder``):
    # a session is passed as it is, so a tick builds no value per active session.
    @property
    def principal_name(self) -> str:
        return self.principal.name

    @property
    def base_rank(self) -> int:
        return self.base_class.rank

    @property
    def principal_active(self) -> int:
        return self.principal.active

    def note_start(self, byte_range: ByteRange | None) -> None:
        """A request of this download: where it says the download starts, if it does.
        Once a delivered range says it, or a request started at byte 0, nothing can
        move the start earlier: every further range of a session passes here."""
        if (
            self.start_offset is None
            and self.start_hint != 0
            and sets_start(byte_range, self.object_size, None)
        ):
            assert byte_range is not None
            hint = self.start_hint
            self.start_hint = byte_range.start if hint is None else min(hint, byte_range.start)

    @property
    def start(self) -> int:
        """The download's first byte: as delivered ranges say, else as its requests do."""
        if self.start_offset is not None:
            return self.start_offset
        return self.start_hint or 0

    def remaining_bytes(self) -> int:
        """Bytes still to send from the download's start to the last byte: neither
        delivered in a range nor sent by a response still running."""
        return max(0, self.object_size - self.start - self.sent_bytes())

    def sent_bytes(self) -> int:
        """Bytes sent from the download's start: its delivered ranges, and what its
        responses still running have sent (issue #28), at most the download's length.

        A response's bytes in flight become its delivered range when it ends, never both
        at once; an interrupted response's are dropped (R-SESS-8 adds whole ranges only).
        """
        start = self.start
        covered = (
            0 if self.delivered is None else self.delivered.covered_bytes(start, self.object_size)
        )
        return min(self.object_size - start, covered + self.bytes_in_flight)

    def is_complete(self) -> bool:
        """Covered from the download's start to the last byte, nothing in flight (R-SESS-8)."""
        if self.in_flight or self.start_offset is None or self.delivered is None:
            return False
        return self.delivered.covers(self.start_offset, self.object_size)
