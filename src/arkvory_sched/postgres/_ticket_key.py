"""The queue-ticket signing key, shared by every process through one row (R-TICKET-4).

A ticket issued by one process must verify on every other one and after a restart, so
the key cannot be made per process. The first writer to start creates it; gateways
only read it (a gateway without a key serves without tickets and asks again later).

The row lives in the schema that is excluded from backups on purpose: a restored
installation makes a new key, so tickets from before the restore are simply ignored
and those clients queue anew, which is the documented behaviour for an invalid ticket.
"""

from __future__ import annotations

import secrets
from typing import Final

from . import _sql as sql
from ._db import Queryable
from ._migrate import DEFAULT_SCHEMA, quote_schema

__all__ = ["TICKET_KEY_BYTES", "ensure_ticket_key", "read_ticket_key"]

TICKET_KEY_BYTES: Final = 32


async def ensure_ticket_key(database: Queryable, schema: str = DEFAULT_SCHEMA) -> bytes:
    """The fleet's key, creating it if this is the first writer to ask.

    Two statements on purpose: a writer whose insert loses the race waits for the
    winner's commit and then does nothing, and only a *new* statement's snapshot sees
    the winner's row. A single ``INSERT … ON CONFLICT DO NOTHING`` combined with a
    ``SELECT`` in one statement would read from the snapshot taken before the wait and
    find no row. Racing writers therefore all return the winner's key. Call it on a
    pool or on a connection outside a ``REPEATABLE READ`` transaction, for the same
    reason.
    """
    quoted = quote_schema(schema)
    await database.execute(
        sql.CREATE_TICKET_KEY.fill(schema=quoted), secrets.token_bytes(TICKET_KEY_BYTES)
    )
    key = await database.fetchval(sql.READ_TICKET_KEY.fill(schema=quoted))
    if key is None:  # only if someone deleted the row between the two statements
        return await ensure_ticket_key(database, schema)
    return bytes(key)


async def read_ticket_key(database: Queryable, schema: str = DEFAULT_SCHEMA) -> bytes | None:
    """The fleet's key, or ``None`` while no writer has created it yet; never writes.

    Gateways use this rather than :func:`ensure_ticket_key` so that a gateway started
    before any writer does not pick a key the writer would then have to accept.
    """
    key = await database.fetchval(sql.READ_TICKET_KEY.fill(schema=quote_schema(schema)))
    return None if key is None else bytes(key)
