"""Session keys: the fixed-size identity of one download session, for every store.

The in-memory store keys its sessions by them and the PostgreSQL store stores them in
its rows, so the hash lives here, apart from both: a change to it would orphan the
sessions already stored (the digest must stay the same across releases).
"""

from __future__ import annotations

import hashlib

__all__ = [
    "KEY_CACHE_ENTRIES",
    "MAX_DOWNLOAD_ID_LENGTH",
    "SessionKeys",
    "session_key",
]

MAX_DOWNLOAD_ID_LENGTH = 128
KEY_CACHE_ENTRIES = 1024  # session keys a SessionKeys remembers (bounds its memory)


def session_key(principal: str, object_id: str, download_id: str | None, address: str) -> bytes:
    """A fixed-size key: principal + object + download id, or the client address without one.

    Hashing bounds the memory of a key whatever the lengths of its parts (R-RES-1), and
    the tag byte keeps an id from ever colliding with an address.
    """
    principal_bytes = principal.encode("utf-8", "surrogatepass")
    object_bytes = object_id.encode("utf-8", "surrogatepass")
    if download_id is not None:
        tag, last = b"\x01", download_id
    else:
        tag, last = b"\x02", address
    # One hash over the joined parts: the same digest as feeding them one by one (keys
    # stored in PostgreSQL must not change), with one call instead of seven on a path
    # every range of every session takes.
    return hashlib.blake2b(
        b"".join(
            (
                len(principal_bytes).to_bytes(4, "big"),
                principal_bytes,
                len(object_bytes).to_bytes(4, "big"),
                object_bytes,
                tag,
                last.encode("utf-8", "surrogatepass"),
            )
        ),
        digest_size=16,
    ).digest()


class SessionKeys:
    """:func:`session_key`, remembered for the requests that follow.

    Every range and every poll of a session asks for the same key, and hashing it is
    the largest part of a further range's admission; on a server that streams the range
    right after, it also runs with cold caches. The memory stays bounded: the cache is
    emptied when it reaches :data:`KEY_CACHE_ENTRIES`.
    """

    __slots__ = ("_known",)

    def __init__(self) -> None:
        self._known: dict[tuple[str, str, str | None, str], bytes] = {}

    def __len__(self) -> int:
        return len(self._known)

    def key(self, principal: str, object_id: str, download_id: str | None, address: str) -> bytes:
        parts = (principal, object_id, download_id, address)
        key = self._known.get(parts)
        if key is None:
            if len(self._known) >= KEY_CACHE_ENTRIES:
                self._known.clear()
            key = self._known[parts] = session_key(principal, object_id, download_id, address)
        return key
