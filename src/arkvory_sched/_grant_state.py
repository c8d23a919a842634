"""The record of one granted response, shared by the per-request queue and the core.

It lives apart from both so that the per-request component (``_request_admission.py``),
which the PostgreSQL implementation uses too, does not depend on the in-memory core.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ._classes import DownloadClass
from ._model import ByteRange

if TYPE_CHECKING:  # only the in-memory store fills ``session``; no import at run time
    from .memory import Session

__all__ = ["GrantState"]


@dataclass(slots=True)
class GrantState:
    """What a store remembers of one granted response until it is reported.

    The in-memory fast path (:class:`~arkvory_sched.FastPath`) hands it out as its
    handle, so that no ``DownloadRequest``, ``Grant`` or outcome value is built for it;
    it satisfies :class:`~arkvory_sched.FastGrant`.
    """

    token: int
    session: Session | None  # None for a per-request place
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
