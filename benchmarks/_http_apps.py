"""The host the HTTP benchmarks serve, bare and behind the middleware.

The host is what an artifact server is, a Starlette file server: ``/files/small.bin``
(1 KiB, below ``session_min_bytes``: per-request admission) and ``/files/large.bin``
(64 MiB: download sessions) from a directory (:func:`write_files` creates them),
answered by ``FileResponse``. The host looks a file up once per request (``os.stat`` in a
worker thread, ETag and Last-Modified as ``FileResponse`` derives them) and keeps it in
``scope["state"]``: behind the middleware the resolver does the lookup and the route
reuses it, so both sides do the same work and differ only by the middleware. uvicorn
serves them (``python -m uvicorn --factory benchmarks._http_apps:bare_app``, files from
``$ARKVORY_BENCH_ROOT``).

In process, a file host's time is a dozen hops to worker threads per request, whose
wake-ups on a loaded machine vary by far more than the middleware costs (three runs of
the 1 KiB figure added 36 to 155 µs). So the in-process figure times a raw ASGI host
instead, the cheapest there is, serving ``/objects/small.bin`` (1 KiB) and 8 MiB ranges
of ``/objects/large.bin`` (1 GiB) from memory: whatever the middleware adds shows there
at full size.
"""

from __future__ import annotations

import hashlib
import importlib.util
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

__all__ = [
    "bare_app",
    "bare_memory_app",
    "benchmark_settings",
    "default_http",
    "expected_bytes",
    "server_environment",
    "wrapped_app",
    "wrapped_memory_app",
    "write_files",
]

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
    """Create the served files in ``root``, unless they exist."""
    root.mkdir(parents=True, exist_ok=True)
    for name, size in FILE_SIZES.items():
        path = root / name
        if path.exists() and path.stat().st_size == size:
            continue
        with path.open("wb") as file:
            for offset in range(0, size, MIB):
                file.write(expected_bytes(offset, min(MIB, size - offset)))


def server_environment(root: Path) -> dict[str, str]:
    """A server's environment: files from ``root``, and ``src`` of this tree first on
    the path, so a run from a second worktree measures its own code in its servers, not
    the checkout the editable install names."""
    project = Path(__file__).resolve().parent.parent
    path = os.pathsep.join((str(project / "src"), str(project)))
    return {**os.environ, "PYTHONPATH": path, ROOT_VARIABLE: str(root)}


def default_http() -> str:
    """The HTTP implementation uvicorn picks: ``httptools`` when installed, else ``h11``."""
    return "httptools" if importlib.util.find_spec("httptools") is not None else "h11"


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
    """The in-memory objects alone (in process: no server, no lifespan)."""
    return _serve_object


def wrapped_memory_app() -> ASGIApp:
    """:func:`bare_memory_app` behind the middleware."""
    return _wrap(_serve_object, _object_target)


# ====================================================================== files
def _wrap(app: ASGIApp, resolver: Callable[[Scope], Awaitable[DownloadTarget | None]]) -> ASGIApp:
    """``app`` behind the middleware: in-memory scheduler, tickets on, its tick loop in
    the lifespan."""
    scheduler = InMemoryDownloadScheduler(benchmark_settings(), ticket_keys=[generate_key()])
    return DownloadSchedulerMiddleware(app, scheduler=scheduler, resolver=resolver)


def _root(root: Path | None) -> Path:
    if root is not None:
        return root
    if not os.environ.get(ROOT_VARIABLE):
        raise RuntimeError(f"{ROOT_VARIABLE} must name the directory of the served files")
    return Path(os.environ[ROOT_VARIABLE])


def bare_app(root: Path | None = None) -> ASGIApp:
    """The file server alone (uvicorn's factory: files from ``$ARKVORY_BENCH_ROOT``)."""
    return _FileHost(_root(root)).app


def wrapped_app(root: Path | None = None) -> ASGIApp:
    """The file server behind the middleware."""
    files = _FileHost(_root(root))
    return _wrap(files.app, files.target)
