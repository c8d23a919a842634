"""arkvory-sched: admit whole download sessions, queue the rest, tell every client when.

The public surface is this namespace; modules starting with ``_`` are private.
"""

from __future__ import annotations

from ._classes import DownloadClass, PrincipalKind, applied_class, default_class
from ._clock import Clock, SystemClock
from ._exceptions import (
    ArkvoryError,
    ConfigurationError,
    InvalidRequestError,
    MigrationError,
    RevisionMismatchError,
    SettingsError,
    SettingsUnavailableError,
    StoreUnavailableError,
)
from ._model import (
    Admission,
    Admitted,
    ByteRange,
    ClassStats,
    ClientKind,
    Decision,
    Delivered,
    DeliveryOutcome,
    DownloadRequest,
    EstimateAccuracy,
    Failed,
    Grant,
    HistogramSnapshot,
    IdleSlots,
    Interrupted,
    Queued,
    RangeKind,
    Rejected,
    RejectReason,
    SchedulerStats,
    SlotSizingState,
    TickReport,
)
from ._own_downloads import DownloadState, OwnDownload, OwnDownloads
from ._port import DownloadScheduler, FastGrant, FastPath
from ._queue_state import ActiveSession, ClassQueue, QueueState
from ._target import DownloadTarget, Resolver
from ._tickets import TicketSigner, generate_key
from ._ticking import next_tick_delay, run_tick_loop
from .asgi import DownloadSchedulerMiddleware
from .memory import InMemoryDownloadScheduler
from .observability import metrics_app, readiness_app
from .settings import (
    AuditEntry,
    AuditOutcome,
    SchedulerSettings,
    SettingsKeeper,
    SettingsStore,
    StoredSettings,
    Strategy,
)

__all__ = [
    "ActiveSession",
    "Admission",
    "Admitted",
    "ArkvoryError",
    "AuditEntry",
    "AuditOutcome",
    "ByteRange",
    "ClassQueue",
    "ClassStats",
    "ClientKind",
    "Clock",
    "ConfigurationError",
    "Decision",
    "Delivered",
    "DeliveryOutcome",
    "DownloadClass",
    "DownloadRequest",
    "DownloadScheduler",
    "DownloadSchedulerMiddleware",
    "DownloadState",
    "DownloadTarget",
    "EstimateAccuracy",
    "Failed",
    "FastGrant",
    "FastPath",
    "Grant",
    "HistogramSnapshot",
    "IdleSlots",
    "InMemoryDownloadScheduler",
    "Interrupted",
    "InvalidRequestError",
    "MigrationError",
    "OwnDownload",
    "OwnDownloads",
    "PrincipalKind",
    "QueueState",
    "Queued",
    "RangeKind",
    "RejectReason",
    "Rejected",
    "Resolver",
    "RevisionMismatchError",
    "SchedulerSettings",
    "SchedulerStats",
    "SettingsError",
    "SettingsKeeper",
    "SettingsStore",
    "SettingsUnavailableError",
    "SlotSizingState",
    "StoreUnavailableError",
    "StoredSettings",
    "Strategy",
    "SystemClock",
    "TickReport",
    "TicketSigner",
    "applied_class",
    "default_class",
    "generate_key",
    "metrics_app",
    "next_tick_delay",
    "readiness_app",
    "run_tick_loop",
]
