"""What the host application tells the middleware about a request (R-SESS-4).

The middleware knows nothing of authentication or storage: the host supplies one
resolver that runs after its own authorization and metadata lookup and returns a
:class:`DownloadTarget` for a download, or ``None`` for anything else — not a download,
or denied (the application answers it as usual and it takes no place in the queue).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from ._classes import DownloadClass, PrincipalKind

__all__ = ["DownloadTarget", "Resolver", "Scope"]

Scope = MutableMapping[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class DownloadTarget:
    """One object a principal is allowed to download.

    ``etag`` (strong, quoted as in the header) and ``last_modified`` (the HTTP-date the
    app sends) let ``If-None-Match``, ``If-Modified-Since`` and ``If-Range`` be judged
    before admission, so a ``304`` takes no place. ``base_class`` is an
    operator-set class for a service account (R-CLASS-6); by default the class follows
    ``principal_kind``.
    """

    principal: str
    principal_kind: PrincipalKind
    object_id: str
    size: int
    etag: str | None = None
    last_modified: str | None = None
    base_class: DownloadClass | None = None


Resolver = Callable[[Scope], Awaitable[DownloadTarget | None]]
"""Called for GET and HEAD requests; ``None`` means pass the request through untouched."""
