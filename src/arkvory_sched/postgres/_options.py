"""``PostgresOptions``: how a :class:`PostgresScheduler` is built, in one value.

The one place the defaults live. ``PostgresScheduler.from_dsn`` and ``connect`` still
take the same names as keyword arguments (:class:`PostgresOptionChanges`) and apply
them on top of an options value, so a call written before the value existed works.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

from .._clock import Clock
from .._request_admission import RequestTimer, wait_with_timeout
from ..settings import SchedulerSettings
from ._migrate import DEFAULT_SCHEMA

__all__ = ["PostgresOptionChanges", "PostgresOptions"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PostgresOptions:
    """Keyword-only, immutable options of a :class:`PostgresScheduler`.

    ``settings`` defaults to ``SchedulerSettings.from_env()``; without a ``clock``,
    queue time is the database's (``DatabaseClock``); without ``ticket_keys`` the key
    is read from (writers: created in) the database. ``writer=False`` makes a read
    gateway that never creates the key nor migrates. ``migrate`` and ``pool_size``
    apply only when the scheduler opens its own pool (``from_dsn``/``connect``).
    """

    schema: str = DEFAULT_SCHEMA
    settings: SchedulerSettings | None = None
    clock: Clock | None = None
    ticket_keys: Sequence[bytes] | None = None
    node_id: str | None = None
    writer: bool = True
    migrate: bool = True
    lease_seconds: float = 10.0
    leader_seconds: float = 3.0
    pool_size: int = 8
    request_timer: RequestTimer = wait_with_timeout


class PostgresOptionChanges(TypedDict, total=False):
    """The fields of :class:`PostgresOptions` as keyword arguments (all optional)."""

    schema: str
    settings: SchedulerSettings | None
    clock: Clock | None
    ticket_keys: Sequence[bytes] | None
    node_id: str | None
    writer: bool
    migrate: bool
    lease_seconds: float
    leader_seconds: float
    pool_size: int
    request_timer: RequestTimer
