"""The queue-ticket signing key, shared by every process through one row (R-TICKET-4).

A ticket issued by one process must verify on every other one and after a restart, so
the key cannot be made per process. The first writer to start creates it; gateways
only read it (a gateway without a key serves without tickets and asks again later).

The row lives in the schema that is excluded from backups on purpose: a restored
installation makes a new key, so tickets from before the restore are simply ignored
and those clients queue anew, which is the documented behaviour for an invalid ticket.
:class:`TicketKeyring` is a scheduler's side of it: the signer it uses now.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from typing import Final

from .._tickets import TicketSigner
from . import _sql as sql
from ._boundary import QUEUE_BOUNDARY
from ._db import Queryable
from ._migrate import DEFAULT_SCHEMA, quote_schema

__all__ = [
    "TICKET_KEY_BYTES",
    "TICKET_KEY_RETRY_SECONDS",
    "TicketKeyring",
    "ensure_ticket_key",
    "read_ticket_key",
]

TICKET_KEY_BYTES: Final = 32
TICKET_KEY_RETRY_SECONDS = 30.0  # R-TICKET-4


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


class TicketKeyring:
    """The signer a scheduler issues and reads tickets with: made from explicit keys,
    or from the fleet's key, read (writers: created) and looked for again every 30 s
    while there is none. ``signer`` is ``None`` meanwhile: no tickets."""

    __slots__ = ("_explicit", "_schema", "_writer", "next_read", "signer")

    def __init__(self, explicit_keys: Sequence[bytes], *, writer: bool, schema: str) -> None:
        self._explicit = tuple(explicit_keys)
        self._writer = writer
        self._schema = schema
        self.signer = TicketSigner(self._explicit) if self._explicit else None
        # The process's own schedule of re-reads, not a queue decision: local time.
        self.next_read = 0.0

    def read_due(self) -> bool:
        """Whether a scheduler without a key should look for it again now."""
        return self.signer is None and time.monotonic() >= self.next_read

    async def refresh(self, database: Queryable) -> None:
        """Read (writers: create) the fleet's key; nothing to do with explicit keys.

        Raises :class:`StoreUnavailableError` when the database does not answer.
        """
        if self._explicit:
            return
        self.next_read = time.monotonic() + TICKET_KEY_RETRY_SECONDS
        key: bytes | None
        with QUEUE_BOUNDARY:
            if self._writer:
                key = await ensure_ticket_key(database, self._schema)
            else:
                key = await read_ticket_key(database, self._schema)
        if key is not None:
            self.signer = TicketSigner([key])
