"""The two ASGI apps the HTTP benchmark serves with uvicorn: bare and with the middleware.

Both serve the same two objects from memory:

- ``/objects/small.bin``: 1 KiB, below ``session_min_bytes`` (per-request admission);
- ``/objects/large.bin``: 1 GiB, above it (download sessions). Its bytes are a repeating
  256-byte pattern (byte ``i`` is ``i % 256``), so nothing of that size is held in memory:
  every body chunk that starts on a multiple of 256 is the same prebuilt ``bytes`` object.

The app is a raw ASGI callable, the cheapest a host can be, so whatever the middleware
adds shows at full size. It answers ``200`` or, for one satisfiable ``Range``,
``206`` with ``Content-Range`` (``416`` when unsatisfiable), sends a strong ``ETag``,
honours ``If-None-Match`` with ``304``, and streams bodies in chunks of
:data:`CHUNK_SIZE` (Starlette's ``FileResponse`` chunk size).

Run one server with ``python -m benchmarks._http_apps bare|wrapped --port N``; it calls
``uvicorn.run`` with ``factory=True`` on :func:`bare_app` or :func:`wrapped_app`. The
``*_timed`` variants add a shim that sums, per object request, the wall time spent in the
app call and in uvicorn's ``send`` within it; ``GET /_timing`` returns and resets the sums.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
import time
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from arkvory_sched import (
    DownloadSchedulerMiddleware,
    DownloadTarget,
    InMemoryDownloadScheduler,
    PrincipalKind,
    SchedulerSettings,
    generate_key,
)

__all__ = [
    "CHUNK_SIZE",
    "FACTORIES",
    "LARGE_PATH",
    "LARGE_SIZE",
    "SMALL_PATH",
    "SMALL_SIZE",
    "TIMING_PATH",
    "bare_app",
    "bare_app_timed",
    "benchmark_settings",
    "default_http",
    "expected_bytes",
    "main",
    "resolve",
    "wrapped_app",
    "wrapped_app_timed",
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
CHUNK_SIZE: Final = 64 * KIB
PRINCIPAL: Final = "bench-service"
TIMING_PATH: Final = "/_timing"

_PERIOD: Final = 256
_PATTERN: Final = bytes(range(_PERIOD)) * (CHUNK_SIZE // _PERIOD + 1)
_ALIGNED_CHUNK: Final = _PATTERN[:CHUNK_SIZE]
_RANGE: Final = re.compile(r"bytes=(\d*)-(\d*)")


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


def _single_range(header: str, size: int) -> tuple[int, int] | bool | None:
    """``(first, last)`` for one satisfiable range, ``None`` to send the whole object
    (no range, several, or a form the app ignores), ``False`` when unsatisfiable."""
    match = _RANGE.fullmatch(header.strip())
    if match is None:
        return None
    first_text, last_text = match.groups()
    if not first_text:
        if not last_text:
            return None
        suffix = int(last_text)
        return (max(0, size - suffix), size - 1) if suffix and size else False
    first = int(first_text)
    last = int(last_text) if last_text else size - 1
    if last_text and last < first:
        return None
    if first >= size:
        return False
    return first, min(last, size - 1)


async def _serve_object(scope: Scope, receive: Receive, send: Send) -> None:
    obj = _OBJECTS.get(scope["path"])
    if obj is None or scope["method"] not in ("GET", "HEAD"):
        status = 404 if obj is None else 405
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    range_header: str | None = None
    if_none_match: str | None = None
    for name, value in scope["headers"]:
        if name == b"range":
            range_header = value.decode("latin-1")
        elif name == b"if-none-match":
            if_none_match = value.decode("latin-1")
    headers = [(b"etag", obj.etag_header), (b"accept-ranges", b"bytes")]
    if if_none_match is not None and obj.etag in (p.strip() for p in if_none_match.split(",")):
        await send({"type": "http.response.start", "status": 304, "headers": headers})
        await send({"type": "http.response.body", "body": b""})
        return
    first, last, status = 0, obj.size - 1, 200
    if range_header is not None:
        chosen = _single_range(range_header, obj.size)
        if chosen is False:
            headers.append((b"content-range", f"bytes */{obj.size}".encode()))
            headers.append((b"content-length", b"0"))
            await send({"type": "http.response.start", "status": 416, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return
        if isinstance(chosen, tuple):
            first, last, status = chosen[0], chosen[1], 206
            headers.append((b"content-range", f"bytes {first}-{last}/{obj.size}".encode()))
    length = last - first + 1
    headers.append((b"content-type", b"application/octet-stream"))
    headers.append((b"content-length", str(length).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    if scope["method"] == "HEAD":
        await send({"type": "http.response.body", "body": b""})
        return
    if obj.size == SMALL_SIZE and length == SMALL_SIZE:
        await send({"type": "http.response.body", "body": _SMALL_BODY})
        return
    offset, end = first, last + 1
    while offset < end:
        size = min(CHUNK_SIZE, end - offset)
        chunk = _chunk(offset, size)
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
        offset += size
    await send({"type": "http.response.body", "body": b""})


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "http":
        await _serve_object(scope, receive, send)
    elif scope["type"] == "lifespan":
        await _lifespan(receive, send)


async def resolve(scope: Scope) -> DownloadTarget | None:
    """The host's resolver: a download target for the two object routes, else ``None``."""
    obj = _OBJECTS.get(scope["path"])
    return None if obj is None else obj.target


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


def bare_app() -> ASGIApp:
    """The object server alone."""
    return _app


def wrapped_app() -> ASGIApp:
    """The object server behind the middleware, tickets on, tick loop in the lifespan."""
    scheduler = InMemoryDownloadScheduler(benchmark_settings(), ticket_keys=[generate_key()])
    return DownloadSchedulerMiddleware(_app, scheduler=scheduler, resolver=resolve)


def _timed(inner: ASGIApp) -> ASGIApp:
    """Sum the wall time of each object request inside the app call and inside ``send``.

    What is left after subtracting ``send`` is the app's own time (plus the middleware's,
    when wrapped): it excludes h11's serialisation and the socket writes, and any wait for
    the socket to drain, which is the only place either app suspends.
    """
    totals = {"requests": 0.0, "app_s": 0.0, "send_s": 0.0}
    clock = time.perf_counter

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] not in _OBJECTS:
            if scope["type"] == "http" and scope["path"] == TIMING_PATH:
                body = json.dumps(totals).encode()
                totals.update(requests=0.0, app_s=0.0, send_s=0.0)
                headers = [(b"content-type", b"application/json")]
                await send({"type": "http.response.start", "status": 200, "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return
            await inner(scope, receive, send)
            return
        in_send = 0.0

        async def timed_send(message: Message) -> None:
            nonlocal in_send
            started = clock()
            await send(message)
            in_send += clock() - started

        started = clock()
        await inner(scope, receive, timed_send)
        totals["app_s"] += clock() - started
        totals["send_s"] += in_send
        totals["requests"] += 1

    return app


def bare_app_timed() -> ASGIApp:
    """:func:`bare_app` with the timing shim."""
    return _timed(bare_app())


def wrapped_app_timed() -> ASGIApp:
    """:func:`wrapped_app` with the timing shim (outside the middleware)."""
    return _timed(wrapped_app())


def default_http() -> str:
    """``httptools`` when it is installed (uvicorn's ``auto`` choice), else ``h11``."""
    return "httptools" if importlib.util.find_spec("httptools") is not None else "h11"


FACTORIES: Final = {
    "bare": "bare_app",
    "wrapped": "wrapped_app",
    "bare_timed": "bare_app_timed",
    "wrapped_timed": "wrapped_app_timed",
}


def main(argv: Sequence[str] | None = None) -> int:
    import uvicorn  # noqa: PLC0415  (only the server process needs it)

    parser = argparse.ArgumentParser(
        prog="python -m benchmarks._http_apps", description="Serve one benchmark app."
    )
    parser.add_argument("app", choices=tuple(FACTORIES))
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--http", choices=("h11", "httptools"), default=default_http())
    args = parser.parse_args(argv)
    uvicorn.run(
        f"benchmarks._http_apps:{FACTORIES[args.app]}",
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
