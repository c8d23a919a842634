"""What several PostgreSQL test modules build the same way: one large download's request,
and a record of the statements sent."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

from asyncpg.connection import Connection

from arkvory_sched import ByteRange, DownloadRequest, PrincipalKind, SchedulerSettings
from arkvory_sched.postgres import PostgresScheduler

MIB = 1024 * 1024
SIZE = 40 * MIB  # above session_min_bytes: every request of it is a session's

# What the fleet tests run with unless a test says otherwise: two slots, no reserve.
FLEET_SETTINGS = SchedulerSettings(
    sessions=2, reserve=0, per_principal=2, ranges_per_session=2, idle_seconds=30.0
)

# The ``connect`` fixture: a new scheduler on the test's schema, options as keywords.
Connect = Callable[..., Awaitable[PostgresScheduler]]


def download(
    principal: str, download_id: str, byte_range: ByteRange | None = None
) -> DownloadRequest:
    return DownloadRequest(
        principal=principal,
        principal_kind=PrincipalKind.SERVICE,
        object_id="releases/big.iso",
        object_size=SIZE,
        byte_range=byte_range,
        download_id=download_id,
        client_address="192.0.2.1",
    )


@contextmanager
def statements_sent() -> Iterator[list[str]]:
    """Every query asyncpg connections send meanwhile (pooled ones included)."""
    sent: list[str] = []
    saved: dict[str, Callable[..., Any]] = {}
    for name in ("execute", "fetch", "fetchrow", "fetchval"):
        original = getattr(Connection, name)
        saved[name] = original

        def traced(
            self: Connection, query: str, *args: Any, _original: Any = original, **kwargs: Any
        ) -> Any:
            sent.append(" ".join(query.split()))
            return _original(self, query, *args, **kwargs)

        setattr(Connection, name, traced)
    try:
        yield sent
    finally:
        for name, original in saved.items():
            setattr(Connection, name, original)
