"""What the download machine asks of its driver: the values :mod:`._session` answers with.

The machine does no I/O; it returns one of these and the sync or async driver carries it
out (send a :class:`Request`, sleep a :class:`Wait`, write a body as a :class:`BodyPlan`
says, read a problem for :data:`READ_PROBLEM`, commit on :data:`FINISHED`). They live
apart from the machine so the drivers and the part file depend on this small vocabulary,
not on the machine's internals.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "FINISHED",
    "PROBLEM_BODY_LIMIT",
    "READ_PROBLEM",
    "BodyPlan",
    "Finished",
    "ReadProblem",
    "Request",
    "Step",
    "Wait",
]

DEFAULT_CHUNK_SIZE: Final = 8 * 1024 * 1024
PROBLEM_BODY_LIMIT: Final = 64 * 1024
"""The most bytes of an error body read to find a problem document."""


@dataclass(frozen=True, slots=True)
class Request:
    """One GET to send, exactly as the machine wants it on the wire."""

    method: str
    url: str
    headers: tuple[tuple[str, str], ...]
    offset: int


@dataclass(frozen=True, slots=True)
class Wait:
    """Sleep until the wall clock reads ``until_wall``; ``seconds`` is the planned length.

    ``reason`` is ``not_before``, ``busy`` or ``backoff``; only the last two count
    against ``wait_limit``.
    """

    until_wall: float
    seconds: float
    reason: str


@dataclass(frozen=True, slots=True)
class Finished:
    """The object is complete: commit the file, then call ``complete()``."""


FINISHED: Final = Finished()


@dataclass(frozen=True, slots=True)
class BodyPlan:
    """Where a response body goes: written from file position ``offset``, ``length``
    bytes (``None``: until the body ends). With ``truncate`` everything from ``offset``
    on is discarded first (a whole-object ``200`` replaces what was saved)."""

    offset: int
    length: int | None
    truncate: bool


@dataclass(frozen=True, slots=True)
class ReadProblem:
    """Not a body to save: read at most :data:`PROBLEM_BODY_LIMIT` bytes of it and pass
    them to ``response_problem()``."""


READ_PROBLEM: Final = ReadProblem()

Step = Request | Wait | Finished
