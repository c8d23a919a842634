"""What the stores need from asyncpg: the query methods shared by a pool and a connection.

The stores accept either, so a process passes its pool and a test or a migration step
can pass one connection. asyncpg ships no type information, so this protocol is also
where the stores' use of it is written down for the type checker.
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["Queryable"]


class Queryable(Protocol):
    """An ``asyncpg.Pool``, ``asyncpg.Connection`` or anything with their query methods.

    Each call on a pool runs on some connection of the pool in autocommit mode, which is
    what the stores rely on: every store operation is a single statement or is written
    to be correct when its statements run on different connections.
    """

    async def execute(self, query: str, *args: object, timeout: float | None = None) -> str: ...

    async def fetchrow(
        self, query: str, *args: object, timeout: float | None = None
    ) -> Any: ...  # an asyncpg Record or None

    async def fetchval(
        self, query: str, *args: object, column: int = 0, timeout: float | None = None
    ) -> Any: ...
