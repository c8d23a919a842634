"""The host the HTTP benchmarks serve, bare and behind the middleware.

Over HTTP it is what an artifact server is, a Starlette file server answering with
``FileResponse``: ``/files/small.bin`` (1 KiB, per-request admission) and
``/files/large.bin`` (64 MiB, download sessions). It looks a file up once per request and
keeps it in ``scope["state"]``; behind the middleware the resolver does the lookup and
the route reuses it, so both sides differ only by the middleware. uvicorn serves them
(``--factory benchmarks._http_apps:bare_app``, files from ``$ARKVORY_BENCH_ROOT``).

In process, a file host's dozen hops to worker threads per request vary by far more than
the middleware costs, so the in-process figure times a raw ASGI host instead, serving
``/objects/small.bin`` (1 KiB) and 8 MiB ranges of ``/objects/large.bin`` (1 GiB) from
memory: whatever the middleware adds shows there at full size.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Awaitable, Callable, MutableMapping
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

Scope = MutableMapping[str, Any]
ASGIApp = Callable[..., Awaitable[None]]

MIB: Final = 1024 * 1024
FILES_PREFIX: Final = "/files/"
SMALL_PATH: Final = FILES_PREFIX + "small.bin"
LARGE_PATH: Final = FILES_PREFIX + "large.bin"
FILE_SIZES: Final = {"small.bin": 1024, "large.bin": 64 * MIB}
ROOT_VARIABLE: Final = "ARKVORY_BENCH_ROOT"
PRINCIPAL: Final = "bench-service"
SMALL_OBJECT: Final = "/objects/small.bin"
LARGE_OBJECT: Final = "/objects/large.bin"
OBJECT_SIZES: Final = {SMALL_OBJECT: 1024, LARGE_OBJECT: 1024 * MIB}
CHUNK: Final = 64 * 1024  # what FileResponse sends per message
_RANGE: Final = re.compile(r"bytes=(\d+)-(\d+)")
_LOOKUP_KEY: Final = "benchmark.file"


def expected_bytes(start: int, length: int) -> bytes:
    """The files' bytes ``[start, start + length)``: a repeating 256-byte pattern, so a
    benchmark can check every body it is sent."""
    offset = start % 256
    return (bytes(range(256)) * ((offset + length) // 256 + 1))[offset : offset + length]


def write_files(root: Path) -> None:
    root.mkdir(parents=True)
    for name, size in FILE_SIZES.items():
        with (root / name).open("wb") as file:
            for offset in range(0, size, MIB):
                file.write(expected_bytes(offset, min(MIB, size - offset)))


def benchmark_settings() -> SchedulerSettings:
    """Limits that never throttle the load, so only the overhead shows: places for wrk's
    16 connections, and 64 ranges per session (the maximum) for the range workload's 8."""
    return SchedulerSettings(
        max_downloads=4096,
        transfer_queue_limit=4096,
        transfer_queue_per_principal=4096,
        sessions=64,
        ranges_per_session=64,
    )


def _wrap(app: ASGIApp, resolver: Callable[[Scope], Awaitable[DownloadTarget | None]]) -> ASGIApp:
    """``app`` behind the middleware: in-memory scheduler, tickets on."""
    scheduler = InMemoryDownloadScheduler(benchmark_settings(), ticket_keys=[generate_key()])
    return DownloadSchedulerMiddleware(app, scheduler=scheduler, resolver=resolver)


# ====================================================================== files
@dataclass(frozen=True, slots=True)
class _File:
    """The host's metadata of one file, looked up once per request."""

    name: str
    path: str
    stat: os.stat_result
    etag: str
    last_modified: str


class _FileHost:
    """The file routes: the metadata lookup, the Starlette app, and the resolver's half."""

    def __init__(self, root: Path) -> None:
        self.paths = {name: str(root / name) for name in FILE_SIZES}
        self.app = Starlette(routes=[Route(FILES_PREFIX + "{name}", self.serve)])

    async def lookup(self, scope: Scope) -> _File | None:
        """Stat the file once per request; the result is kept in ``scope["state"]``."""
        state: dict[str, Any] = scope.setdefault("state", {})
        found: _File | None = state.get(_LOOKUP_KEY)
        if found is not None:
            return found
        name = str(scope["path"]).removeprefix(FILES_PREFIX)
        path = self.paths.get(name)
        if path is None:
            return None
        st = await anyio.to_thread.run_sync(os.stat, path)
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
        """The middleware's resolver: a download target for each file."""
        found = await self.lookup(scope)
        if found is None:
            return None
        return _target(found.name, found.stat.st_size, found.etag, found.last_modified)


def bare_app() -> ASGIApp:
    return _FileHost(Path(os.environ[ROOT_VARIABLE])).app


def wrapped_app() -> ASGIApp:
    files = _FileHost(Path(os.environ[ROOT_VARIABLE]))
    return _wrap(files.app, files.target)


# ====================================================================== in memory
def _target(
    object_id: str, size: int, etag: str | None = None, last_modified: str | None = None
) -> DownloadTarget:
    return DownloadTarget(
        principal=PRINCIPAL,
        principal_kind=PrincipalKind.SERVICE,
        object_id=object_id,
        size=size,
        etag=etag or f'"{object_id.rsplit("/", 1)[-1]}-{size}"',
        last_modified=last_modified,
    )


_OBJECT_TARGETS: Final = {path: _target(path, size) for path, size in OBJECT_SIZES.items()}
_ALIGNED_CHUNK: Final = expected_bytes(0, CHUNK)
_SMALL_BODY: Final = expected_bytes(0, OBJECT_SIZES[SMALL_OBJECT])


async def _object_target(scope: Scope) -> DownloadTarget | None:
    return _OBJECT_TARGETS.get(scope["path"])


async def _serve_object(scope: Scope, receive: Any, send: Any) -> None:
    """An object from memory: whole, or the one range ``bytes=FIRST-LAST`` asked for
    (the only form the benchmarks send), in 64 KiB messages as ``FileResponse`` sends."""
    target = _OBJECT_TARGETS[scope["path"]]
    headers = [(b"etag", str(target.etag).encode()), (b"accept-ranges", b"bytes")]
    first, last, status = 0, target.size - 1, 200
    for name, value in scope["headers"]:
        matched = _RANGE.fullmatch(value.decode("latin-1")) if name == b"range" else None
        if matched:
            first, last, status = int(matched[1]), min(int(matched[2]), target.size - 1), 206
            headers.append((b"content-range", f"bytes {first}-{last}/{target.size}".encode()))
    headers.append((b"content-type", b"application/octet-stream"))
    headers.append((b"content-length", str(last - first + 1).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    if last - first + 1 == len(_SMALL_BODY):
        await send({"type": "http.response.body", "body": _SMALL_BODY})
        return
    for offset in range(first, last + 1, CHUNK):
        size = min(CHUNK, last + 1 - offset)
        aligned = size == CHUNK and offset % 256 == 0
        body = _ALIGNED_CHUNK if aligned else expected_bytes(offset, size)
        await send({"type": "http.response.body", "body": body, "more_body": True})
    await send({"type": "http.response.body", "body": b""})


def bare_memory_app() -> ASGIApp:
    return _serve_object


def wrapped_memory_app() -> ASGIApp:
    return _wrap(_serve_object, _object_target)
