"""What a ``PostgresScheduler`` process keeps: its options, caches, meters, counters.

The queue itself lives in the database; this is the process's own part of it (ADR
0010) and the small helpers every other part of the scheduler uses: a connection,
a refusal counted, the change signal, database trouble noted.
"""

from __future__ import annotations

import logging
import math
import os
import secrets
import socket
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import anyio
import asyncpg

from .._classes import DownloadClass
from .._early_polls import EarlyPolls
from .._model import (
    ByteRange,
    Rejected,
    RejectReason,
    SchedulerStats,
)
from .._rate import PeakRateMeter
from .._request_admission import RequestAdmission
from .._session_keys import SessionKeys
from .._tickets import TicketSigner
from ..measures import EstimateScorer, Histogram
from ..policy import CLASS_COUNT, ClassGate, current_gate
from ..settings import SchedulerSettings
from ._db_clock import DatabaseClock
from ._estimates import QueueSnapshot
from ._leader import QueueLeader
from ._leases import Lease, LeaseCache
from ._migrate import validate_schema
from ._options import PostgresOptions
from ._pool import KeptConnections

__all__ = ["DATABASE_ERRORS", "SchedulerState"]


log = logging.getLogger("arkvory_sched.postgres")

DATABASE_ERRORS: tuple[type[BaseException], ...] = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,  # a connection terminated mid-query (asyncpg #1069)
    OSError,
    TimeoutError,
)
"""What a lost connection, a restarting server or a slow database raises."""

_WAITING, _ACTIVE, _PAUSED = 0, 1, 2
HEARTBEAT_SECONDS = 1.0
TICKET_KEY_RETRY_SECONDS = 30.0  # R-TICKET-4
STORAGE_RETRY_AFTER = 2
NEWCOMER_COUNT_CAP = 1024  # a newcomer's waiters-ahead count stops here
UNRECORDED_LIMIT = 4096  # delivery records kept through an outage, then the oldest go
ACQUIRE_TIMEOUT = 2.0  # seconds a request waits for a connection: longer is database trouble
KEPT_CONNECTIONS = 4  # at most, and at most half the pool (KeptConnections)
_BOUND_OUTCOMES = frozenset({"queue_full", "principal_limit"})  # admit_session's refusals


@dataclass(slots=True)
class _SessionGrant:
    lease: Lease
    byte_range: ByteRange | None
    download_class: DownloadClass
    started: float
    last_progress: float
    progressed: int = 0


class SchedulerState:
    """The per-process state of :class:`PostgresScheduler`; the other parts add behaviour."""

    def __init__(
        self,
        pool: asyncpg.Pool | None = None,
        options: PostgresOptions | None = None,
        *,
        owns_pool: bool = False,
    ) -> None:
        options = PostgresOptions() if options is None else options
        self._options = options
        settings, clock, ticket_keys = options.settings, options.clock, options.ticket_keys
        lease_seconds, leader_seconds = options.lease_seconds, options.leader_seconds
        self._pool = pool
        self._kept: KeptConnections | None = None
        self._dsn: str | None = None
        self._pool_size = options.pool_size
        self._prepared = False
        self._migrate = False
        self._migrated = True
        self._schema = validate_schema(options.schema)
        self._environment = settings or SchedulerSettings.from_env()
        self._settings = self._environment
        # Queue time for the whole fleet: the database's, unless another clock is passed
        # in. A DatabaseClock (made here, or passed in) is fed by every heartbeat.
        self._db_clock = clock if isinstance(clock, DatabaseClock) else None
        if clock is None:
            clock = self._db_clock = DatabaseClock()
        self._clock = clock
        self._explicit_keys = tuple(ticket_keys) if ticket_keys else ()
        self._signer = TicketSigner(self._explicit_keys) if self._explicit_keys else None
        node_id = options.node_id
        self._node = node_id or f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
        self._writer = options.writer
        self._lease_seconds = lease_seconds
        self._leader_seconds = leader_seconds
        self._owns_pool = owns_pool
        # A cached lease is trusted for a while without asking the database. Its real
        # bound is the lease in the database (its clock, real time): with the database
        # as queue clock the trust runs on this process's monotonic clock. A clock passed
        # in (tests: a FakeClock) is the fleet's time, so trust runs on it too: whether a
        # range is answered from the cache or from the database then follows the queue
        # time of the requests, not the pace of the machine running them.
        trust_clock = time.monotonic if self._db_clock is not None else clock.monotonic
        self._leases = LeaseCache(max_trust=min(2.0, lease_seconds / 3), now=trust_clock)
        self._keys = SessionKeys()  # session keys of recent requests (no hash per range)
        self._early = EarlyPolls()  # early polls answered without a statement (ADR 0029)
        self._grants: dict[int, _SessionGrant] = {}
        self._unrecorded: deque[tuple[Lease, ByteRange, float]] = deque(maxlen=UNRECORDED_LIMIT)
        self._next_token = 0
        self._closed = False
        self._changed = anyio.Event()
        self._snapshot: QueueSnapshot | None = None
        self._snapshot_until = 0.0
        self._rate = PeakRateMeter()
        self._last_rate = 0.0
        self._bytes_by_class = [0] * CLASS_COUNT
        # Small objects stay in this process: its own per-request places (R-SESS-3),
        # the same component the in-memory scheduler uses.
        self._requests = RequestAdmission(
            self._environment, self._clock, rate=self._rate, bytes_by_class=self._bytes_by_class
        )
        self._request_timer = options.request_timer
        self._wait_histograms = [Histogram() for _ in range(CLASS_COUNT)]
        self._estimates = EstimateScorer()
        self._admitted = 0
        self._rejections: dict[RejectReason, int] = {}
        self._last_tick_seconds = 0.0
        self._last_stats: SchedulerStats | None = None
        # Fleet bookkeeping, on this process's monotonic clock (never queue decisions).
        self._next_heartbeat = 0.0
        self._next_key_read = 0.0
        self._leader = QueueLeader(
            self._node,
            lease_seconds=lease_seconds,
            leader_seconds=leader_seconds,
            heartbeat_seconds=HEARTBEAT_SECONDS,
            clock=self._clock,
        )
        self._last_trouble = -math.inf
        # The windows' verdict (R-WIN-2), kept until a class opens or closes.
        self._gate: ClassGate | None = None

    def _require_pool(self) -> asyncpg.Pool:
        if self._pool is None:
            raise RuntimeError("PostgresScheduler.start() has not run")
        return self._pool

    def _acquire(self) -> Any:
        """A pooled connection; a slow pool is database trouble, not a hang."""
        return self._require_pool().acquire(timeout=ACQUIRE_TIMEOUT)

    def _kept_connection(self) -> Any:
        """A connection for the statements of every download (a newcomer's admission,
        a range's record), kept out of the pool between them (``KeptConnections``)."""
        kept = self._kept
        if kept is None:
            pool = self._require_pool()
            size = min(KEPT_CONNECTIONS, pool.get_max_size() // 2)
            kept = self._kept = KeptConnections(pool, size, timeout=ACQUIRE_TIMEOUT)
        return kept.connection()

    @property
    def node_id(self) -> str:
        return self._node

    @property
    def settings(self) -> SchedulerSettings:
        return self._settings

    @property
    def is_leader(self) -> bool:
        return self._leader.is_leader

    @property
    def leader(self) -> QueueLeader:
        """This process's side of the leader lease (tests and diagnostics)."""
        return self._leader

    @property
    def ticket_signing(self) -> bool:
        """Whether this process issues and reads queue tickets (it has the key)."""
        return self._signer is not None

    def _class_gate(self) -> ClassGate:
        """The windows' verdict at this process's wall time (R-WIN-2, R-RES-5)."""
        settings = self._settings
        gate = current_gate(
            self._gate, settings.class_windows, settings.sessions, self._clock.wall()
        )
        self._gate = gate
        return gate

    def _invalidate(self) -> None:
        self._snapshot = None
        self._notify()

    def _reject(
        self, reason: RejectReason, retry_after: int, cls: DownloadClass | None
    ) -> Rejected:
        self._rejections[reason] = self._rejections.get(reason, 0) + 1
        return Rejected(reason, retry_after, cls)

    def _notify(self) -> None:
        changed = self._changed
        self._changed = anyio.Event()
        changed.set()

    def _trouble(self, error: BaseException) -> None:
        self._last_trouble = self._clock.monotonic()
        log.warning("database trouble on node %s: %s", self._node, error)
