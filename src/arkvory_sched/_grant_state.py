"""The record of one granted response, shared by the per-request queue and the stores.

It lives apart from both so that the per-request component (``_request_admission.py``),
which the PostgreSQL implementation uses too, does not depend on the in-memory store.
The record is generic in the session it belongs to: the in-memory store files a range
under its own session record (``GrantState[Session]``), and this module names no store.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from ._classes import DownloadClass
from ._model import ByteRange

__all__ = ["GrantState", "SessionT"]

SessionT = TypeVar("SessionT")
"""The store's record of the session a range belongs to."""


@dataclass(slots=True)
class GrantState(Generic[SessionT]):
    """What a store remembers of one granted response until it is reported.

    The in-memory fast path (:class:`~arkvory_sched.FastPath`) hands it out as its
    handle, so that no ``DownloadRequest``, ``Grant`` or outcome value is built for it;
    it satisfies :class:`~arkvory_sched.FastGrant`. Being generic costs nothing at run
    time: ``Generic`` adds no slot and no constructor step.
    """

    token: int
    session: SessionT | None  # None for a per-request place
    byte_range: ByteRange | None
    started: float
    last_progress: float
    progressed: int = 0
    download_class: DownloadClass = DownloadClass.RELEASE
    ticket: str | None = None  # handed out with a range of the fast path

    @property
    def per_request(self) -> bool:
        """A per-request place (ended by ``release_per_request``), not a session's range."""
        return self.session is None
