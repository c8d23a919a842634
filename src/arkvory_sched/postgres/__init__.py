"""PostgreSQL storage shared by every process of a fleet: migrations, settings, ticket key.

Everything lives in one schema of its own (default ``arkvory``), so that it can be
excluded from backups (R-PG-5) and several installations can share a database.

``PostgresScheduler`` is a facade over parts with one job each. It builds them and
hands each, in its constructor, what it uses; no part reads another's private state,
and the port's calls go straight to the part whose job they are::

    PostgresScheduler (_scheduler)          builds the parts, passes each call on
    ├── Admission (_admission)              which way a request goes; 503 on trouble
    │   ├── RangeAdmission (_ranges)        ranges under a lease held here (ADR 0019)
    │   └── SessionAdmission (_session_admission)  newcomer, waiter, return (ADR 0011)
    │       ├── Claims (_claims)            taking a slot, a waiter's order and aging
    │       └── Answers (_answers)          the Queued answer: place, estimate, ticket
    ├── Delivery (_delivery)                report/progress, records, late records
    ├── Fleet (_fleet)                      start-up, the tick, heartbeat, renewals
    │   ├── QueueLeader (_leader)           the leader's queue work (one process)
    │   └── SlotSignal (_slot_signal)       hears slots freed elsewhere (ADR 0037)
    ├── Configuration (_configuration)      configure(), the settings store on the pool
    ├── Statistics (_stats)                 stats()
    ├── QueueStateReader (_queue_state)     queue_state() for the operator
    └── OwnDownloadsReader (_own_downloads) downloads_of() for one person

What several parts share is handed to each of them as a value of its own job:

* ``Running`` (_running): the settings in force, the windows' verdict, closing, and
  the change signals that wake held requests (the ones at the door also when another
  process frees a slot).
* ``Connections`` (_boundary): the pool and the connections kept aside for every
  download's statements, and when the database last failed this process.
* ``LeaseCache`` (_leases): the leases this process trusts; with it, the
  ``SessionGrant`` of each range in flight (admitted by ``RangeAdmission``, reported
  to ``Delivery``).
* ``QueueSnapshots`` (_estimates), ``Meters`` (_meters), ``TicketKeyring``
  (_ticket_key), and the process's ``EarlyPolls`` and per-request ``RequestAdmission``.

The database boundary is ``_boundary``: the only module that names the driver's errors.
Every connection lent by ``Connections``, and every other driver call through
``DriverBoundary``, leaves a lost connection, a restarting server or a timeout as
``StoreUnavailableError`` (the settings store: ``SettingsUnavailableError``), raised
from the driver's error; each part decides there what its caller is told.
"""

from __future__ import annotations

from .._exceptions import MigrationError
from ._migrate import (
    DEFAULT_SCHEMA,
    apply_migrations,
    pending_migrations,
    validate_schema,
)
from ._options import PostgresOptions
from ._scheduler import PostgresScheduler
from ._settings_store import PostgresSettingsStore
from ._ticket_key import ensure_ticket_key, read_ticket_key

__all__ = [
    "DEFAULT_SCHEMA",
    "MigrationError",
    "PostgresOptions",
    "PostgresScheduler",
    "PostgresSettingsStore",
    "apply_migrations",
    "ensure_ticket_key",
    "pending_migrations",
    "read_ticket_key",
    "validate_schema",
]
