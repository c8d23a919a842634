"""The demo's answer to "is this request a download, and whose?" (R-SESS-4).

The middleware asks before it queues anything. Authorization comes first and the file
lookup second, exactly as in a real artifact server, so a denied request or a missing
file never takes a place in the queue: the resolver answers ``None`` and the file
server itself answers ``401``/``404``. The checks are the file server's own
(:func:`principal_for`, :func:`find_file`), so both always agree on what is served.
"""

from __future__ import annotations

from pathlib import Path

import anyio

from .._target import DownloadTarget, Resolver, Scope
from ._auth import TokenMap, principal_for
from ._files import READ_METHODS, InvalidPathError, find_file, requested_path

__all__ = ["make_resolver"]


def make_resolver(root: Path, tokens: TokenMap, *, prefix: str = "/files") -> Resolver:
    """A :data:`Resolver` for the files a :class:`FileServer` with the same arguments serves.

    ``prefix`` must be the file server's: ``"/files"`` when the server is the whole
    application, ``""`` when it is mounted at ``/files``. The object id is the file's
    real path relative to ``root``, so two links to one file share one download
    session, and the ETag is the one the server will send.
    """
    resolved_root = Path(root).resolve()

    async def resolve(scope: Scope) -> DownloadTarget | None:
        if scope.get("type") != "http" or scope.get("method") not in READ_METHODS:
            return None
        relative = requested_path(scope, prefix)
        if relative is None:
            return None
        principal = principal_for(scope, tokens)
        if principal is None:
            return None
        try:
            info = await anyio.to_thread.run_sync(find_file, resolved_root, relative)
        except InvalidPathError:
            return None
        if info is None:
            return None
        name, kind = principal
        return DownloadTarget(
            principal=name,
            principal_kind=kind,
            object_id=info.relative,
            size=info.size,
            etag=info.etag,
            last_modified=info.last_modified,
        )

    return resolve
