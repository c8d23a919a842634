"""Queue tickets: a download's arrival time, carried by the client (R-TICKET-1..3).

A client that restarts (a new process, a new connection, another HA node) would
otherwise join the end of the queue. The ticket lets it prove when it first arrived,
so it keeps its place. The signature binds the ticket to one download through a hash
of the session key, which never leaves the server, and to both times, so that it can be
neither moved to another download nor edited to claim an earlier arrival. Tickets are
reissued with every response and accepted only for a short time after issue, so an old
ticket cannot be replayed to regain a place that was given up.

Format::

    2.<arrival>.<issued>.<signature>

with both times in wall-clock milliseconds written in lowercase base 36, and the
signature an HMAC-SHA256, unpadded URL-safe base64, over
``<hex sha256(session key)>.<arrival>.<issued>``.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Sequence
from typing import Final

from itsdangerous import Signer

__all__ = [
    "TICKET_FUTURE_SKEW_MS",
    "TICKET_MAX_AGE_MS",
    "TICKET_MAX_LENGTH",
    "TicketSigner",
    "generate_key",
]

TICKET_MAX_AGE_MS: Final = 15 * 60 * 1000
TICKET_FUTURE_SKEW_MS: Final = 2 * 60 * 1000
TICKET_MAX_LENGTH: Final = 200

_VERSION: Final = "2"
_SALT: Final = b"arkvory.download-ticket.v2"
_KEY_BYTES: Final = 32
_BASE36_DIGITS: Final = "0123456789abcdefghijklmnopqrstuvwxyz"

# The whole grammar in one pattern, so anything else (another version, a field too many
# or too few, upper case, signs, underscores or spaces that ``int(x, 36)`` would accept,
# non-ASCII text) is rejected before any parsing. Times must be written canonically
# (no leading zeros), and the signature is the 43 characters of a 32-byte digest whose
# last character carries two zero padding bits: the decoder ignores those bits, so
# without this a signature would have several spellings that all verify.
_TIME: Final = r"(0|[1-9a-z][0-9a-z]*)"
_SIGNATURE: Final = r"([A-Za-z0-9_-]{42}[AEIMQUYcgkosw048])"
_TICKET_RE: Final = re.compile(rf"{re.escape(_VERSION)}\.{_TIME}\.{_TIME}\.{_SIGNATURE}")


def generate_key() -> bytes:
    """A fresh signing key: 32 bytes from the operating system's secure source."""
    return secrets.token_bytes(_KEY_BYTES)


def _base36(value: int) -> str:
    if value == 0:
        return "0"
    digits: list[str] = []
    while value:
        value, digit = divmod(value, 36)
        digits.append(_BASE36_DIGITS[digit])
    return "".join(reversed(digits))


def _signed_value(session_key: bytes, arrival: str, issued: str) -> bytes:
    # Only a hash of the session key is signed: the key holds the principal and the
    # object, which the signature must bind to but need not reveal or store.
    session_hash = hashlib.sha256(session_key).hexdigest()
    return f"{session_hash}.{arrival}.{issued}".encode("ascii")


class TicketSigner:
    """Issues and checks queue tickets with a list of keys, newest first.

    New tickets are signed with ``keys[0]``; a ticket signed with any key of the list
    is accepted, so a key can be rotated without invalidating tickets already handed
    out (they expire within :data:`TICKET_MAX_AGE_MS` anyway). itsdangerous expects
    its keys oldest first and signs with the last one, so the list is reversed for it.
    """

    __slots__ = ("_signer",)

    def __init__(self, keys: Sequence[bytes]) -> None:
        if isinstance(keys, (bytes, bytearray, str)):
            raise TypeError("keys must be a sequence of keys, not a single key")
        if not keys:
            raise ValueError("at least one ticket key is required")
        if any(not key for key in keys):
            raise ValueError("ticket keys cannot be empty")
        self._signer = Signer(
            [bytes(key) for key in reversed(keys)],
            salt=_SALT,
            key_derivation="hmac",
            digest_method=hashlib.sha256,
        )

    def issue(self, session_key: bytes, arrival_ms: int, issued_ms: int) -> str:
        """A ticket saying the download of ``session_key`` arrived at ``arrival_ms``."""
        if arrival_ms < 0 or issued_ms < 0:
            raise ValueError(
                f"ticket times cannot be negative, got arrival={arrival_ms}, issued={issued_ms}"
            )
        if arrival_ms > issued_ms:
            raise ValueError(
                f"a ticket cannot be issued before its arrival: "
                f"arrival={arrival_ms}, issued={issued_ms}"
            )
        arrival, issued = _base36(arrival_ms), _base36(issued_ms)
        signature = self._signer.get_signature(_signed_value(session_key, arrival, issued))
        ticket = f"{_VERSION}.{arrival}.{issued}.{signature.decode('ascii')}"
        if len(ticket) > TICKET_MAX_LENGTH:
            raise ValueError("ticket times are too large to fit in a ticket")
        return ticket

    def verify(self, ticket: str | None, session_key: bytes, now_ms: int) -> int | None:
        """The signed arrival time if ``ticket`` is valid for this download now, else None.

        A ticket comes from the client, so every malformed, forged, foreign or expired
        ticket only means "no ticket": the download queues anew and nothing is raised.
        An issue time up to :data:`TICKET_FUTURE_SKEW_MS` ahead of ``now_ms`` is another
        node's clock running fast and counts as now; further ahead it is rejected.
        """
        if not isinstance(ticket, str) or not ticket or len(ticket) > TICKET_MAX_LENGTH:
            return None
        match = _TICKET_RE.fullmatch(ticket)
        if match is None:
            return None
        arrival, issued, signature = match.groups()
        arrival_ms, issued_ms = int(arrival, 36), int(issued, 36)
        if arrival_ms > issued_ms:
            return None
        if issued_ms > now_ms + TICKET_FUTURE_SKEW_MS:
            return None
        if now_ms - min(issued_ms, now_ms) > TICKET_MAX_AGE_MS:
            return None
        if not self._signer.verify_signature(
            _signed_value(session_key, arrival, issued), signature
        ):
            return None
        return arrival_ms

    def __repr__(self) -> str:
        # Never show the keys.
        return f"TicketSigner(<{len(self._signer.secret_keys)} keys>)"
