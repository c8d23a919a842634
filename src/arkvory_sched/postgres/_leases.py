"""What one process knows about the slot leases of active sessions.

The cache is what lets ranges of an active session pass without a database round trip
(the common case: a 20 GB download is thousands of ranges). Its rule is conservative:
an entry is trusted only until a deadline on this process's monotonic clock that is
earlier than the lease's expiry as the database reported it, and never further ahead
than ``max_trust`` seconds, so a release made by another process (idle, completion) is
noticed within that bound even if this process never renews the lease itself.
A :class:`SessionGrant` is one range this process serves under a lease, from its
admission to its report.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from .._classes import DownloadClass
from .._model import ByteRange

__all__ = ["UNWRITTEN", "Lease", "LeaseCache", "SessionGrant"]

SAFETY_MARGIN_SECONDS = 1.0
UNWRITTEN = -1  # ``Lease.bytes_written`` when the row's count is not known


@dataclass(slots=True)
class Lease:
    """A slot lease of one session as this process last saw it."""

    key: bytes
    slot_no: int
    token: int
    download_class: DownloadClass
    object_size: int
    arrival_wall_ms: int
    trusted_until: float
    held: bool  # this process renews it
    in_flight: int = 0
    ticket: str | None = None
    ticket_issued: float = 0.0
    yield_requested: bool = False  # preempted: yield at the next range (R-PREEMPT-2)
    # R-SESS-11 across processes (ADR 0019): how many ranges of the session this process
    # may run (its share in ``range_share``), whether another process holds or wants a
    # share (then idle share goes back), and what a failed hand-back still owes.
    share: int = 0
    contended: bool = False
    unreturned: int = 0
    # Issue #28 (ADR 0033): what the responses running here under this lease have sent
    # (their progress), and what this process's range_share row holds of it as far as
    # it knows (UNWRITTEN after a write that may not have arrived).
    bytes_in_flight: int = 0
    bytes_written: int = 0


@dataclass(slots=True)
class SessionGrant:
    """A range of a session in flight here: its lease, and the bytes it sent so far."""

    lease: Lease
    byte_range: ByteRange | None
    download_class: DownloadClass
    started: float
    last_progress: float
    progressed: int = 0


class LeaseCache:
    """Leases by session key, with a trust deadline each (see the module docstring)."""

    __slots__ = ("_leases", "_max_trust", "_now")

    def __init__(
        self, *, max_trust: float = 2.0, now: Callable[[], float] = time.monotonic
    ) -> None:
        self._leases: dict[bytes, Lease] = {}
        self._max_trust = max_trust
        self._now = now

    def __len__(self) -> int:
        return len(self._leases)

    def __iter__(self) -> Iterator[Lease]:
        return iter(list(self._leases.values()))

    def trusted(self, key: bytes) -> Lease | None:
        """The lease of ``key`` if it may be used without asking the database."""
        lease = self._leases.get(key)
        if lease is None or lease.trusted_until <= self._now():
            return None
        return lease

    def get(self, key: bytes) -> Lease | None:
        return self._leases.get(key)

    def remember(
        self,
        key: bytes,
        *,
        slot_no: int,
        token: int,
        download_class: DownloadClass,
        object_size: int,
        arrival_wall_ms: int,
        seconds_left: float,
        held: bool,
        claimed: bool = False,
    ) -> Lease:
        """Record a lease the database just confirmed with ``seconds_left`` to run.

        ``claimed``: this process just claimed the slot, which gives it a share of one
        range (the ``slot_range_shares`` trigger); a lease joined from another process
        starts with none.
        """
        lease = self._leases.get(key)
        if lease is None or lease.token != token:
            # A new lease (or one with a new token): nothing of it is in flight yet.
            lease = Lease(
                key,
                slot_no,
                token,
                download_class,
                object_size,
                arrival_wall_ms,
                0.0,
                held,
                share=1 if claimed else 0,
            )
            self._leases[key] = lease
        lease.held = held
        self.confirm(lease, seconds_left)
        return lease

    def confirm(self, lease: Lease, seconds_left: float) -> None:
        """The database says ``lease`` runs ``seconds_left`` more seconds."""
        trust = min(seconds_left - SAFETY_MARGIN_SECONDS, self._max_trust)
        lease.trusted_until = self._now() + max(0.0, trust)

    def forget(self, key: bytes) -> Lease | None:
        return self._leases.pop(key, None)

    def held(self) -> list[Lease]:
        """Leases this process renews."""
        return [lease for lease in self._leases.values() if lease.held]

    def idle_shares(self) -> list[Lease]:
        """Leases whose unused range share should go back to the session's budget:
        another process holds or waits for a share, or this process no longer renews
        the lease, or an earlier hand-back failed."""
        return [
            lease
            for lease in self._leases.values()
            if lease.unreturned
            or (lease.share > lease.in_flight and (lease.contended or not lease.held))
        ]

    def unwritten_or_running(self) -> list[Lease]:
        """Leases whose bytes in flight differ from what this process last wrote, or
        that have bytes in flight (their count is written again with its time)."""
        return [
            lease
            for lease in self._leases.values()
            if lease.bytes_in_flight != lease.bytes_written or lease.bytes_in_flight > 0
        ]

    def in_flight_keys(self) -> list[bytes]:
        """Sessions with a response of this process in progress."""
        return [lease.key for lease in self._leases.values() if lease.in_flight]

    def drop_untrusted_idle(self) -> None:
        """Forget leases no longer trusted, without responses in flight, without a
        range share still to hand back and without a count in flight still to write
        (bounded size)."""
        now = self._now()
        stale = [
            key
            for key, lease in self._leases.items()
            if lease.trusted_until <= now
            and not (lease.in_flight or lease.share or lease.unreturned)
            and lease.bytes_written == lease.bytes_in_flight
        ]
        for key in stale:
            del self._leases[key]
