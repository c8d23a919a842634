"""Who is calling the operator API, as the host says (the API has no accounts of its own).

The host application knows its users; the API only needs two things about a caller:
whether they may change settings or only read them, and a name to record in the audit
trail (``updatedBy``). The host passes an :data:`Authorize` callable that returns an
:class:`Identity` — or ``None`` for a request it does not recognise. There is no
default: an API that changes how a server shares its link must never be open because
someone forgot to configure it, so the app factory requires the callable.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final, Literal

from starlette.requests import Request

__all__ = ["OPERATOR", "VIEWER", "Authorize", "Identity", "Role", "identify"]

Role = Literal["operator", "viewer"]
OPERATOR: Final[Role] = "operator"
VIEWER: Final[Role] = "viewer"
_ROLES: Final = (OPERATOR, VIEWER)


@dataclass(frozen=True, slots=True)
class Identity:
    """A caller the host recognised: ``role`` decides what they may do, ``name`` is what
    the audit trail records (a user name, a service account).

    Operators read and write; viewers read the settings, their history and the queue
    state without the list of active sessions (which names principals).
    """

    role: Role
    name: str

    def __post_init__(self) -> None:
        if self.role not in _ROLES:
            raise ValueError(f"role must be 'operator' or 'viewer', not {self.role!r}")
        if not self.name or not self.name.strip():
            raise ValueError("an identity needs a name: the audit trail records it")

    @property
    def may_write(self) -> bool:
        return self.role == OPERATOR


Authorize = Callable[[Request], Identity | Awaitable[Identity | None] | None]
"""The host's answer to "who is this?": sync or async, ``None`` for "nobody I know"."""


async def identify(authorize: Authorize, request: Request) -> Identity | None:
    """Ask the host's callable, awaiting it if it is async; refuse anything but an
    :class:`Identity` or ``None`` loudly, since guessing a role would be guessing
    someone's permissions."""
    answer = authorize(request)
    if inspect.isawaitable(answer):
        answer = await answer
    if answer is None or isinstance(answer, Identity):
        return answer
    raise TypeError(f"authorize must return an Identity or None, not {type(answer).__name__}")
