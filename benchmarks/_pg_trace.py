"""Count and time the statements the PostgreSQL scheduler sends, per call.

``StatementTrace`` wraps the query methods of ``asyncpg.connection.Connection`` in this
process while it is active (pooled connections forward to them, and so do
transactions: ``BEGIN``, ``COMMIT`` and savepoints go through ``execute``). Only the
statements of the task that records (and of tasks it starts meanwhile) count, so a tick
loop running beside the measured calls adds nothing to them. Each statement is named
after its constant in ``arkvory_sched.postgres._sql`` or ``_sql_tick`` when it is one,
else after its first words. Round trips are what new-session admission costs, so this
is the part of the figures that the machine's load does not change.
"""

from __future__ import annotations

import re
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from asyncpg.connection import Connection

from arkvory_sched.postgres import _sql, _sql_tick

__all__ = ["Breakdown", "StatementTrace"]

_METHODS = ("execute", "fetch", "fetchrow", "fetchval")
_SAVEPOINT = re.compile(r"__asyncpg_savepoint_\w+")


def _names() -> dict[str, str]:
    return {
        " ".join(value.split()): name
        for module in (_sql, _sql_tick)
        for name, value in vars(module).items()
        if name.isupper() and isinstance(value, str)
    }


def statement_name(query: str, known: dict[str, str]) -> str:
    text = " ".join(query.split())
    if text in known:
        return known[text]
    if text.startswith("SELECT pg_advisory_unlock_all()"):
        return "pool reset (asyncpg Connection.reset)"
    text = _SAVEPOINT.sub("…", text).rstrip(";")
    return text if len(text) <= 48 else text[:47] + "…"


@dataclass(slots=True)
class Breakdown:
    """Statements of ``calls`` calls of one kind: count and total milliseconds by name."""

    calls: int = 0
    count: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    ms: dict[str, float] = field(default_factory=lambda: defaultdict(float))

    @property
    def statements(self) -> float:
        return sum(self.count.values()) / max(1, self.calls)

    @property
    def total_ms(self) -> float:
        return sum(self.ms.values()) / max(1, self.calls)

    def rows(self) -> list[tuple[str, float, float]]:
        """(name, statements per call, ms per call), the most expensive first."""
        per = max(1, self.calls)
        return sorted(
            ((name, self.count[name] / per, self.ms[name] / per) for name in self.count),
            key=lambda row: -row[2],
        )


class StatementTrace:
    """``with trace.recording(breakdown): ...`` — statements of that block go there."""

    def __init__(self) -> None:
        self._known = _names()
        self._target: ContextVar[Breakdown | None] = ContextVar("statement_trace", default=None)
        self._saved: dict[str, Callable[..., Any]] = {}

    def install(self) -> None:
        for method in _METHODS:
            original = getattr(Connection, method)
            self._saved[method] = original
            setattr(Connection, method, self._wrap(original))

    def uninstall(self) -> None:
        for method, original in self._saved.items():
            setattr(Connection, method, original)
        self._saved.clear()

    def _wrap(self, original: Callable[..., Any]) -> Callable[..., Any]:
        trace = self

        async def traced(connection: Connection, query: str, *args: Any, **kwargs: Any) -> Any:
            target = trace._target.get()
            if target is None:
                return await original(connection, query, *args, **kwargs)
            started = time.perf_counter()
            try:
                return await original(connection, query, *args, **kwargs)
            finally:
                name = statement_name(query, trace._known)
                target.count[name] += 1
                target.ms[name] += 1000 * (time.perf_counter() - started)

        return traced

    @contextmanager
    def recording(self, breakdown: Breakdown) -> Iterator[Breakdown]:
        token = self._target.set(breakdown)
        try:
            yield breakdown
        finally:
            self._target.reset(token)
