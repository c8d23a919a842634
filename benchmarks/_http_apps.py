"""The ASGI apps the HTTP benchmarks serve: the same host bare and behind the middleware.

The host is what an artifact server is, a Starlette file server: ``/files/small.bin``
(1 KiB, below ``session_min_bytes``: per-request admission) and ``/files/large.bin``
(64 MiB: download sessions) in the directory named by ``ARKVORY_BENCH_ROOT``
(:func:`write_files` creates them), answered by ``FileResponse``. The host looks a file
up once per request (``os.stat`` in a worker thread, ETag and Last-Modified as
``FileResponse`` derives them) and keeps it in ``scope["state"]``: behind the middleware
the resolver does the lookup and the route reuses it, so both sides do the same work
and differ only by the middleware.

``/objects/small.bin`` (1 KiB) and ``/objects/large.bin`` (8 MiB ranges of 1 GiB) come
from memory through a raw ASGI app, the cheapest host there is, for the in-process
figures: whatever the middleware adds shows there at full size. Every body is a
repeating 256-byte pattern, so the benchmarks check it against :func:`expected_bytes`.

``python -m benchmarks._http_apps bare|wrapped --port N`` serves one with uvicorn.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import re
import sys
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from dataclasses import dataclass
from email.utils import formatdate
from pathlib import Path
from typing import Any, Final

import anyio.to_thread
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, PlainTextResponse, Response
from starlette.routing import Route

from arkvory_sched import (
    DownloadSchedulerMiddleware,
    DownloadTarget,
    InMemoryDownloadScheduler,
    PrincipalKind,
    SchedulerSettings,
    generate_key,
)

__all__ = [
    "bare_app",
    "bare_memory_app",
    "default_http",
    "expected_bytes",
    "server_environment",
    "wrapped_app",
    "wrapped_memory_app",
    "write_files",
]

Message = MutableMapping[str, Any]
Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

KIB: Final = 1024
MIB: Final = 1024 * KIB
GIB: Final = 1024 * MIB

SMALL_PATH: Final = "/objects/small.bin"
LARGE_PATH: Final = "/objects/large.bin"
SMALL_SIZE: Final = 1 * KIB
LARGE_SIZE: Final = 1 * GIB
FILES_PREFIX: Final = "/files/"
FILE_SMALL_PATH: Final = FILES_PREFIX + "small.bin"
FILE_LARGE_PATH: Final = FILES_PREFIX + "large.bin"
FILE_LARGE_SIZE: Final = 64 * MIB
FILE_SIZES: Final = {"small.bin": SMALL_SIZE, "large.bin": FILE_LARGE_SIZE}
ROOT_VARIABLE: Final = "ARKVORY_BENCH_ROOT"
CHUNK_SIZE: Final = 64 * KIB
PRINCIPAL: Final = "bench-service"

_PERIOD: Final = 256
_PATTERN: Final = bytes(range(_PERIOD)) * (CHUNK_SIZE // _PERIOD + 1)
_ALIGNED_CHUNK: Final = _PATTERN[:CHUNK_SIZE]
_RANGE: Final = re.compile(r"bytes=(\d+)-(\d+)")


def expected_bytes(start: int, length: int) -> bytes:
    """The object's bytes ``[start, start + length)`` (both objects use the pattern)."""
    offset = start % _PERIOD
    whole, rest = divmod(offset + length, len(_PATTERN))
    return (_PATTERN * whole + _PATTERN[:rest])[offset:]


@dataclass(frozen=True, slots=True)
class _Object:
    size: int
    etag: str
    etag_header: bytes
    target: DownloadTarget


def _object(path: str, size: int) -> _Object:
    etag = f'"{path.rsplit("/", 1)[-1]}-{size}"'
    target = DownloadTarget(
        principal=PRINCIPAL,
        principal_kind=PrincipalKind.SERVICE,
        object_id=path,
        size=size,
        etag=etag,
    )
    return _Object(size, etag, etag.encode(), target)


_OBJECTS: Final[dict[str, _Object]] = {
    SMALL_PATH: _object(SMALL_PATH, SMALL_SIZE),
    LARGE_PATH: _object(LARGE_PATH, LARGE_SIZE),
}
_SMALL_BODY: Final = expected_bytes(0, SMALL_SIZE)


def _chunk(offset: int, length: int) -> bytes:
    if length == CHUNK_SIZE and offset % _PERIOD == 0:
        return _ALIGNED_CHUNK
    return expected_bytes(offset, length)


async def _serve_object(scope: Scope, receive: Receive, send: Send) -> None:
    """An object from memory: whole, or the one range ``bytes=FIRST-LAST`` asked for
    (the only form the benchmarks send), in 64 KiB messages as ``FileResponse`` sends."""
    obj = _OBJECTS.get(scope["path"])
    if obj is None:
        await send({"type": "http.response.start", "status": 404, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    headers = [(b"etag", obj.etag_header), (b"accept-ranges", b"bytes")]
    first, last, status = 0, obj.size - 1, 200
    for name, value in scope["headers"]:
        matched = _RANGE.fullmatch(value.decode("latin-1")) if name == b"range" else None
        if matched:
            first, last, status = int(matched[1]), min(int(matched[2]), obj.size - 1), 206
            headers.append((b"content-range", f"bytes {first}-{last}/{obj.size}".encode()))
    length = last - first + 1
    headers.append((b"content-type", b"application/octet-stream"))
    headers.append((b"content-length", str(length).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    if length == SMALL_SIZE:
        await send({"type": "http.response.body", "body": _SMALL_BODY})
        return
    offset, end = first, last + 1
    while offset < end:
        size = min(CHUNK_SIZE, end - offset)
        chunk = _chunk(offset, size)
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
        offset += size
    await send({"type": "http.response.body", "body": b""})


def server_environment(root: Path) -> dict[str, str]:
    """A server's environment: files from ``root``, and ``src`` of this tree first on
    the path, so a run from a second worktree measures its own code in its servers, not
    the checkout the editable install names."""
    project = Path(__file__).resolve().parent.parent
    path = os.pathsep.join((str(project / "src"), str(project)))
    return {**os.environ, "PYTHONPATH": path, ROOT_VARIABLE: str(root)}


def write_files(root: Path) -> None:
    """Create the served files in ``root``, with the pattern bytes, unless they exist."""
    root.mkdir(parents=True, exist_ok=True)
    for name, size in FILE_SIZES.items():
        path = root / name
        if path.exists() and path.stat().st_size == size:
            continue
        with path.open("wb") as file:
            for offset in range(0, size, MIB):
                file.write(expected_bytes(offset, min(MIB, size - offset)))


@dataclass(frozen=True, slots=True)
class _File:
    """The host's metadata of one file, looked up once per request."""

    name: str
    path: str
    stat: os.stat_result
    etag: str
    last_modified: str


_LOOKUP_KEY: Final = "benchmark.file"


class _FileHost:
    """The file routes: the metadata lookup, the Starlette app, and the resolver's half."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.paths = {name: str(root / name) for name in FILE_SIZES}
        self.app = Starlette(routes=[Route(FILES_PREFIX + "{name}", self.serve)])

    async def lookup(self, scope: Scope) -> _File | None:
        """Stat the file once per request; the result is kept in ``scope["state"]``."""
        state: dict[str, Any] | None = scope.get("state")
        if state is None:
            state = scope["state"] = {}
        found: _File | None = state.get(_LOOKUP_KEY)
        if found is not None:
            return found
        name = str(scope["path"]).removeprefix(FILES_PREFIX)
        path = self.paths.get(name)
        if path is None:
            return None
        try:
            st = await anyio.to_thread.run_sync(os.stat, path)
        except FileNotFoundError:
            return None
        # The validators FileResponse derives from the same stat.
        base = f"{st.st_mtime}-{st.st_size}".encode()
        etag = f'"{hashlib.md5(base, usedforsecurity=False).hexdigest()}"'
        found = _File(name, path, st, etag, formatdate(st.st_mtime, usegmt=True))
        state[_LOOKUP_KEY] = found
        return found

    async def serve(self, request: Request) -> Response:
        found = await self.lookup(request.scope)
        if found is None:
            return PlainTextResponse("not found", status_code=404)
        headers = {"etag": found.etag, "last-modified": found.last_modified}
        return FileResponse(found.path, stat_result=found.stat, headers=headers)

    async def target(self, scope: Scope) -> DownloadTarget | None:
        found = await self.lookup(scope)
        if found is None:
            return None
        return DownloadTarget(
            principal=PRINCIPAL,
            principal_kind=PrincipalKind.SERVICE,
            object_id=found.name,
            size=found.stat.st_size,
            etag=found.etag,
            last_modified=found.last_modified,
        )


def _file_host() -> _FileHost:
    root = os.environ.get(ROOT_VARIABLE)
    if not root:
        raise RuntimeError(f"{ROOT_VARIABLE} must name the directory of the served files")
    return _FileHost(Path(root))


def _resolver(files: _FileHost | None) -> Callable[[Scope], Awaitable[DownloadTarget | None]]:
    async def resolve(scope: Scope) -> DownloadTarget | None:
        """The host's resolver: a download target for the objects and the files."""
        obj = _OBJECTS.get(scope["path"])
        if obj is not None:
            return obj.target
        return None if files is None else await files.target(scope)

    return resolve


def benchmark_settings() -> SchedulerSettings:
    """Limits that never throttle the benchmark's load, so only the overhead shows.

    ``max_downloads`` 4,096 per-request places (wrk opens 16 connections); 64 session
    slots and 64 ranges per session (the maximum), so the 8 connections of the range
    workload all fit in one active session. Everything else keeps its default.
    """
    return SchedulerSettings(
        max_downloads=4096,
        transfer_queue_limit=4096,
        transfer_queue_per_principal=4096,
        sessions=64,
        ranges_per_session=64,
    )


def _wrap(app: ASGIApp, files: _FileHost | None) -> ASGIApp:
    """``app`` behind the middleware, tickets on, tick loop in the lifespan."""
    scheduler = InMemoryDownloadScheduler(benchmark_settings(), ticket_keys=[generate_key()])
    return DownloadSchedulerMiddleware(app, scheduler=scheduler, resolver=_resolver(files))


def bare_app() -> ASGIApp:
    """The file server alone, with the files of ``ARKVORY_BENCH_ROOT``."""
    return _file_host().app


def wrapped_app() -> ASGIApp:
    """The file server behind the middleware."""
    files = _file_host()
    return _wrap(files.app, files)


def bare_memory_app() -> ASGIApp:
    """The in-memory objects alone (in-process measurements: no server, no lifespan)."""
    return _serve_object


def wrapped_memory_app() -> ASGIApp:
    """:func:`bare_memory_app` behind the middleware."""
    return _wrap(_serve_object, None)


def default_http() -> str:
    """``httptools`` when it is installed (uvicorn's ``auto`` choice), else ``h11``."""
    return "httptools" if importlib.util.find_spec("httptools") is not None else "h11"


def main(argv: Sequence[str] | None = None) -> int:
    import uvicorn  # noqa: PLC0415  (only the server process needs it)

    parser = argparse.ArgumentParser(
        prog="python -m benchmarks._http_apps", description="Serve one benchmark app."
    )
    parser.add_argument("app", choices=("bare", "wrapped"))
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--http", choices=("h11", "httptools"), default=default_http())
    args = parser.parse_args(argv)
    uvicorn.run(
        f"benchmarks._http_apps:{args.app}_app",
        factory=True,
        host=args.host,
        port=args.port,
        workers=None,
        loop="asyncio",
        http=args.http,
        lifespan="on",
        access_log=False,
        log_level="warning",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
