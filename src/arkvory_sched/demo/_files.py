"""The demo's artifact store: every regular file under a directory, over HTTP.

A pure ASGI app, so that it can sit behind :class:`DownloadSchedulerMiddleware` exactly
as a host application would. It implements what download clients rely on and what the
scheduler observes — strong ETags, ``Range`` (single and multipart), ``If-Range``,
``If-None-Match`` — because curl, wget, browsers and the SDK must be able to resume
and validate downloads against it (R-CLIENT-8). Bodies are streamed in chunks read in
a worker thread, never loaded whole, and each chunk can be paced by a shared
:class:`BandwidthGovernor` so that a loopback behaves like a real link.

Paths come from the network: a request may only ever name a regular, non-hidden file
whose real location (after following symlinks) is inside the root. Hidden files are
never served, which also keeps the ticket key the demo stores in its root private.
"""

from __future__ import annotations

import mimetypes
import os
import secrets
import stat
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from email.utils import formatdate
from pathlib import Path
from typing import Any, Final

import anyio
from anyio.abc import TaskGroup

from .._model import ByteRange
from .._target import Scope
from ..asgi import (
    Satisfiable,
    Unsatisfiable,
    WholeObject,
    coalesce,
    content_range,
    etag_listed,
    http_date,
    parse_range,
)
from ._auth import TokenMap, principal_for
from ._bandwidth import BandwidthGovernor

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "FileInfo",
    "FileReadError",
    "FileServer",
    "InvalidPathError",
    "find_file",
    "requested_path",
    "route_path",
]

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

DEFAULT_CHUNK_SIZE: Final = 256 * 1024
READ_METHODS: Final = frozenset({"GET", "HEAD"})

_ALLOW: Final = b"GET, HEAD"
_TEXT: Final = b"text/plain; charset=utf-8"
_OCTET_STREAM: Final = "application/octet-stream"
# mimetypes reports "x.tar.gz" as a tar with gzip *encoding*; sending that as
# Content-Encoding would make clients unpack the artifact, so name the container instead.
_ENCODED_TYPES: Final[Mapping[str, str]] = {
    "gzip": "application/gzip",
    "bzip2": "application/x-bzip2",
    "xz": "application/x-xz",
    "br": "application/x-brotli",
    "compress": "application/x-compress",
}


class InvalidPathError(ValueError):
    """A request path no file can have (a NUL byte): answered ``400``, not ``404``."""


class FileReadError(RuntimeError):
    """The file could not be read to the end after its response had started.

    A :class:`RuntimeError` on purpose: it is the server failing, not the client going
    away, so the middleware must report it as failed rather than interrupted.
    """


@dataclass(frozen=True, slots=True)
class FileInfo:
    """A servable file: where it really is, its id relative to the root, and validators."""

    path: Path
    relative: str
    size: int
    mtime_ns: int

    @classmethod
    def from_stat(cls, path: Path, relative: str, st: os.stat_result) -> FileInfo:
        return cls(path=path, relative=relative, size=st.st_size, mtime_ns=st.st_mtime_ns)

    @property
    def etag(self) -> str:
        """Strong, quoted: size and nanosecond mtime, so any rewrite changes it."""
        return f'"{self.size:x}-{self.mtime_ns:x}"'

    @property
    def mtime_seconds(self) -> int:
        return self.mtime_ns // 1_000_000_000

    @property
    def last_modified(self) -> str:
        return formatdate(self.mtime_seconds, usegmt=True)

    @property
    def content_type(self) -> str:
        guessed, encoding = mimetypes.guess_type(self.relative, strict=False)
        if encoding is not None:
            return _ENCODED_TYPES.get(encoding, _OCTET_STREAM)
        return guessed or _OCTET_STREAM


def route_path(scope: Scope) -> str:
    """The request path below the point the app is mounted at (``root_path``)."""
    path: str = scope.get("path", "")
    root_path: str = scope.get("root_path", "")
    if root_path and path.startswith(root_path) and path[len(root_path) :][:1] in ("/", ""):
        return path[len(root_path) :]
    return path


def requested_path(scope: Scope, prefix: str) -> str | None:
    """The file path a request names below ``prefix`` (not yet validated), or ``None``."""
    route = route_path(scope)
    wanted = prefix.rstrip("/") + "/"
    if not route.startswith(wanted):
        return None
    return route[len(wanted) :]


def find_file(root: Path, relative: str) -> FileInfo | None:
    """The regular file ``relative`` names under the resolved ``root``, or ``None``.

    ``None`` for an empty path, an absolute one, empty, ``.`` or ``..`` segments, any
    hidden segment, a missing file, anything that is not a regular file, and a path
    whose real location (symlinks followed) is outside ``root`` or hidden. Raises
    :class:`InvalidPathError` for a NUL byte. Blocking: call it in a worker thread.
    """
    if "\x00" in relative:
        raise InvalidPathError("a path cannot contain a NUL byte")
    if not _acceptable(relative):
        return None
    try:
        real = (root / relative).resolve(strict=True)
        inside = real.relative_to(root).as_posix()
        st = real.stat()
    except (OSError, ValueError, RuntimeError):  # missing, outside root, symlink loop
        return None
    if not stat.S_ISREG(st.st_mode) or not _acceptable(inside):
        return None
    return FileInfo.from_stat(real, inside, st)


def _acceptable(relative: str) -> bool:
    if not relative or relative.startswith("/"):
        return False
    return all(part and not part.startswith(".") for part in relative.split("/"))


class _ClientGoneError(Exception):
    """``send`` failed: the client disconnected mid-response."""


class FileServer:
    """Serve ``root``'s files at ``<prefix>/<path>`` for ``GET`` and ``HEAD``.

    ``prefix`` is relative to where the app is mounted: ``"/files"`` when it is the
    whole application, ``""`` when a router already mounts it at ``/files``.
    ``tokens`` are the bearer tokens of :mod:`._auth`: a request with credentials that
    are not a known token gets ``401`` (so the server and the download resolver agree
    on who may download). ``bandwidth`` paces every chunk through one shared bucket.
    """

    def __init__(
        self,
        root: Path,
        *,
        bandwidth: BandwidthGovernor | None = None,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        tokens: TokenMap | None = None,
        prefix: str = "/files",
    ) -> None:
        if chunk_size <= 0:
            raise ValueError(f"chunk_size must be positive, got {chunk_size}")
        self.root = Path(root).resolve()
        self.bandwidth = bandwidth
        self.chunk_size = chunk_size
        self.tokens: TokenMap = {} if tokens is None else tokens
        self.prefix = prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "lifespan":
            await _acknowledge_lifespan(receive, send)
            return
        if kind != "http":
            await send({"type": "websocket.close", "code": 1008})
            return
        method: str = scope["method"]
        relative = requested_path(scope, self.prefix)
        if relative is None:
            await _plain(send, 404, "not found")
            return
        if method not in READ_METHODS:
            await _plain(send, 405, f"method {method} not allowed", [(b"allow", _ALLOW)])
            return
        if principal_for(scope, self.tokens) is None:
            challenge = b'Bearer realm="arkvory-demo", error="invalid_token"'
            await _plain(send, 401, "unknown token", [(b"www-authenticate", challenge)])
            return
        try:
            info = await anyio.to_thread.run_sync(find_file, self.root, relative)
        except InvalidPathError as error:
            await _plain(send, 400, str(error))
            return
        if info is None:
            await _plain(send, 404, "not found")
            return
        await self._serve(scope, receive, send, info, head=method == "HEAD")

    async def _serve(
        self, scope: Scope, receive: Receive, send: Send, found: FileInfo, *, head: bool
    ) -> None:
        try:
            file = await anyio.open_file(found.path, "rb")
        except OSError:
            await _plain(send, 404, "not found")
            return
        async with file:
            # Validators come from the open file, so the bytes sent are the version the
            # ETag names even if the file is replaced meanwhile (R-CLIENT-8).
            st = await anyio.to_thread.run_sync(os.fstat, file.wrapped.fileno())
            if not stat.S_ISREG(st.st_mode):
                await _plain(send, 404, "not found")
                return
            info = FileInfo.from_stat(found.path, found.relative, st)
            request = _request_headers(scope)
            validators = [
                (b"etag", info.etag.encode("ascii")),
                (b"last-modified", info.last_modified.encode("ascii")),
            ]
            if _not_modified(request, info):
                await _respond(send, 304, validators, b"")
                return
            common = [
                *validators,
                (b"accept-ranges", b"bytes"),
            ]
            parsed: WholeObject | Satisfiable | Unsatisfiable = WholeObject()
            range_header = request.get("range")
            if not head and range_header is not None and _if_range_holds(request, info):
                parsed = parse_range(range_header, info.size)
            if isinstance(parsed, Unsatisfiable):
                await _respond(
                    send,
                    416,
                    [*common, (b"content-range", parsed.content_range.encode("ascii"))],
                    b"range not satisfiable\n",
                    content_type=_TEXT,
                )
                return
            content_type = info.content_type.encode("latin-1")
            if isinstance(parsed, Satisfiable):
                ranges = coalesce(parsed.ranges)
                if len(ranges) == 1:
                    only = ranges[0]
                    headers = [
                        *common,
                        (b"content-range", content_range(only, info.size).encode("ascii")),
                    ]
                    await self._send_body(receive, send, file, 206, headers, content_type, [only])
                else:
                    boundary, parts = _multipart(ranges, info)
                    multipart = b"multipart/byteranges; boundary=" + boundary
                    await self._send_body(receive, send, file, 206, common, multipart, parts)
                return
            if head:
                await _respond(
                    send, 200, common, b"", content_type=content_type, content_length=info.size
                )
                return
            parts = [ByteRange.whole(info.size)] if info.size else []
            await self._send_body(receive, send, file, 200, common, content_type, parts)

    async def _send_body(
        self,
        receive: Receive,
        send: Send,
        file: anyio.AsyncFile[bytes],
        status: int,
        headers: list[tuple[bytes, bytes]],
        content_type: bytes,
        parts: Sequence[bytes | ByteRange],
    ) -> None:
        """Stream ``parts`` (literal bytes or ranges of the file) as one response.

        A client that disconnects — ``http.disconnect`` while a chunk waits for
        bandwidth, or ``send`` raising :class:`OSError` — ends the response quietly
        without its final message, which is how the middleware tells it was
        interrupted. A read failure is raised as :class:`FileReadError`.
        """
        length = sum(len(part) if isinstance(part, bytes) else part.length for part in parts)
        start = {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type),
                (b"content-length", str(length).encode("ascii")),
                *headers,
            ],
        }
        failure: Exception | None = None
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_watch_disconnect, receive, tasks)
            try:
                await _send(send, start)
                for part in parts:
                    if isinstance(part, bytes):
                        await _send(send, _body(part))
                    else:
                        await self._send_range(send, file, part)
                await _send(send, {"type": "http.response.body", "body": b""})
            except _ClientGoneError:
                pass
            except Exception as error:
                failure = error
            tasks.cancel_scope.cancel()
        if failure is not None:
            raise failure

    async def _send_range(self, send: Send, file: anyio.AsyncFile[bytes], part: ByteRange) -> None:
        try:
            await file.seek(part.start)
        except OSError as error:
            raise FileReadError(f"cannot seek to byte {part.start}: {error}") from error
        remaining = part.length
        while remaining > 0:
            try:
                chunk = await file.read(min(self.chunk_size, remaining))
            except OSError as error:
                raise FileReadError(f"cannot read the file: {error}") from error
            if not chunk:
                raise FileReadError("the file became shorter while it was being sent")
            remaining -= len(chunk)
            if self.bandwidth is not None:
                await self.bandwidth.acquire(len(chunk))
            await _send(send, _body(chunk))


def _multipart(
    ranges: Iterable[ByteRange], info: FileInfo
) -> tuple[bytes, list[bytes | ByteRange]]:
    """The parts of a ``multipart/byteranges`` body (RFC 9110 §14.6) and its boundary."""
    boundary = secrets.token_hex(16).encode("ascii")
    content_type = info.content_type.encode("latin-1")
    parts: list[bytes | ByteRange] = []
    for index, byte_range in enumerate(ranges):
        head = b"" if index == 0 else b"\r\n"
        head += b"--" + boundary + b"\r\n"
        head += b"content-type: " + content_type + b"\r\n"
        head += b"content-range: " + content_range(byte_range, info.size).encode("ascii")
        head += b"\r\n\r\n"
        parts.extend((head, byte_range))
    parts.append(b"\r\n--" + boundary + b"--\r\n")
    return boundary, parts


def _request_headers(scope: Scope) -> dict[str, str]:
    """The first value of each request header, lower-case names."""
    headers: dict[str, str] = {}
    for name, value in scope.get("headers", ()):
        key = bytes(name).decode("latin-1").lower()
        headers.setdefault(key, bytes(value).decode("latin-1"))
    return headers


def _not_modified(request: Mapping[str, str], info: FileInfo) -> bool:
    """RFC 9110 §13.2.2: ``If-None-Match`` (weak comparison), else ``If-Modified-Since``."""
    if_none_match = request.get("if-none-match")
    if if_none_match is not None:
        return etag_listed(if_none_match, info.etag, weak=True)
    if_modified_since = request.get("if-modified-since")
    if if_modified_since is not None:
        since = http_date(if_modified_since)
        return since is not None and info.mtime_seconds <= since
    return False


def _if_range_holds(request: Mapping[str, str], info: FileInfo) -> bool:
    """``If-Range`` absent, or naming the current version: strong ETag or exact date."""
    if_range = request.get("if-range")
    if if_range is None:
        return True
    value = if_range.strip()
    if value.startswith(('"', "W/")):
        return value == info.etag  # a weak tag never matches a strong comparison
    return http_date(value) == info.mtime_seconds


def _body(chunk: bytes) -> Message:
    return {"type": "http.response.body", "body": chunk, "more_body": True}


async def _send(send: Send, message: Message) -> None:
    try:
        await send(message)
    except OSError as error:
        raise _ClientGoneError from error


async def _watch_disconnect(receive: Receive, tasks: TaskGroup) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    tasks.cancel_scope.cancel()


async def _respond(
    send: Send,
    status: int,
    headers: list[tuple[bytes, bytes]],
    body: bytes,
    *,
    content_type: bytes | None = None,
    content_length: int | None = None,
) -> None:
    """A complete response in two messages; a client already gone is not an error."""
    if content_type is not None:
        headers = [(b"content-type", content_type), *headers]
    if status != 304:
        size = len(body) if content_length is None else content_length
        headers = [*headers, (b"content-length", str(size).encode("ascii"))]
    try:
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
    except OSError:
        return


async def _plain(
    send: Send, status: int, text: str, headers: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    await _respond(send, status, list(headers), (text + "\n").encode(), content_type=_TEXT)


async def _acknowledge_lifespan(receive: Receive, send: Send) -> None:
    """Served on its own, the app has nothing to start or stop."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
