"""The clients of a simulated crowd: what each wants, with which tool, and what it saw."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from arkvory_sched import PrincipalKind

__all__ = ["TAIL_BYTES", "ClientKind", "ClientResult", "ClientSpec"]

TAIL_BYTES = 64 * 1024  # a ZIP reader's first read: the end of central directory and more


class ClientKind(StrEnum):
    """How a client asks for its object."""

    SDK = "sdk"  # 8 MiB ranges with a download id and the ticket
    GET = "get"  # one GET of the whole object, no id (curl, wget)
    RESUME = "resume"  # ``bytes=N-`` from ``resume_from``, no id (curl -C -)
    TAIL = "tail"  # the last 64 KiB first, then the whole object, no id (a ZIP reader)

    @property
    def protocol(self) -> bool:
        """Whether the client sends a download id (the SDK) or not (third-party tools)."""
        return self is ClientKind.SDK


@dataclass(slots=True)
class ClientSpec:
    """Who downloads what, when they start, with which tool and how fast they read."""

    name: str
    principal: str
    kind: PrincipalKind
    size: int
    arrival: float
    requested_class: str | None = None
    client: ClientKind = ClientKind.SDK
    rate_cap: float | None = None  # bytes/s the client can take; None: any share
    resume_from: int = 0  # where a RESUME client's open range starts


@dataclass(slots=True)
class ClientResult:
    spec: ClientSpec
    first_start: float | None = None
    finished: float | None = None
    # The first answer with a place: its interval is judged (``estimate_at`` is when).
    estimate_at: float | None = None
    estimate_earliest: float | None = None
    estimate_latest: float | None = None
    # The first start told on a configured or measured rate: its error is judged. An
    # answer on a guessed rate says so and is judged by its interval only (ADR 0042).
    estimate: float | None = None
    guessed: bool = False  # the first answer with a place was a guess
    first_position: int | None = None
    polls: int = 0
    rejections: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def completion(self) -> float | None:
        if self.finished is None:
            return None
        return self.finished - self.spec.arrival

    @property
    def wait(self) -> float | None:
        if self.first_start is None:
            return None
        return self.first_start - self.spec.arrival
