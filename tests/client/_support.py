"""Test doubles for the SDK: a fake clock, recorded sleeps, a scripted object server, and
one harness that runs the same download through the sync or the async client.

Nothing here sleeps for real: a sleep advances the fake clock by its length, so a test
can wait out a thousand busy answers or an hour-long ``Retry-After`` in milliseconds.
The server is an ``httpx.MockTransport`` handler, usable by both clients unchanged.
"""

from __future__ import annotations

import random
import re
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.lowlevel
import httpx

from arkvory_client import (
    AsyncClient,
    Client,
    DownloadResult,
    Event,
    RetryPolicy,
)

Kind = Literal["sync", "async"]
KINDS: tuple[Kind, ...] = ("sync", "async")
URL = "https://arkvory.test/files/image.tar"
WALL_START = 1_780_000_000.0


class FakeClock:
    """A :class:`arkvory_client.Clock` that moves only when told; the wall side may jump."""

    def __init__(self, *, wall: float = WALL_START, monotonic: float = 1_000.0) -> None:
        self._wall = wall
        self._monotonic = monotonic

    def monotonic(self) -> float:
        return self._monotonic

    def wall(self) -> float:
        return self._wall

    def advance(self, seconds: float) -> None:
        assert seconds >= 0, "time does not go backwards"
        self._wall += seconds
        self._monotonic += seconds

    def jump_wall(self, seconds: float) -> None:
        """A suspended laptop (+) or a clock set back (-): only the wall clock moves."""
        self._wall += seconds


class Sleeps:
    """Records every sleep and advances the clock by it; ``hook`` runs after each step."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.steps: list[float] = []
        self.hook: Callable[[int, float], None] | None = None

    def __call__(self, seconds: float) -> None:
        assert seconds >= 0
        self.steps.append(seconds)
        self.clock.advance(seconds)
        if self.hook is not None:
            self.hook(len(self.steps), seconds)

    async def async_sleep(self, seconds: float) -> None:
        self(seconds)
        await anyio.lowlevel.checkpoint()

    @property
    def total(self) -> float:
        return sum(self.steps)


# ---------------------------------------------------------------------- the server
Answer = Callable[["ObjectServer", httpx.Request], httpx.Response]


def _problem(status: int, reason: str, headers: dict[str, str], **extra: Any) -> httpx.Response:
    body = {"type": f"urn:arkvory:problem:{reason}", "title": reason, "status": status}
    body |= {"reason": reason, **extra}
    return httpx.Response(
        status, headers={"content-type": "application/problem+json", **headers}, json=body
    )


def queued(
    *,
    retry_after: str = "30",
    position: int | None = 3,
    starts_at: str | None = "2026-05-28T21:00:00Z",
    ticket: str | None = None,
    download_class: str = "bulk",
    earliest: str | None = None,
    guessed: bool = False,
) -> Answer:
    """``503 download_queued`` with the queue headers, as ``_problems.queued`` writes it:
    the interval ``earliest``..``starts_at``, on a guessed rate if ``guessed``."""

    def answer(server: ObjectServer, request: httpx.Request) -> httpx.Response:
        headers = {"retry-after": retry_after, "arkvory-download-class": download_class}
        if starts_at is not None:
            low = earliest or starts_at
            starts = f"{starts_at}; earliest={low}; latest={starts_at}"
            headers["arkvory-starts-at"] = starts + ("; basis=guess" if guessed else "")
        if position is not None:
            headers["arkvory-queue-position"] = str(position)
        if ticket is not None:
            headers["arkvory-queue-ticket"] = ticket
        return _problem(503, "download_queued", headers, position=position)

    return answer


def busy(retry_after: str = "2") -> Answer:
    """``503 busy`` with ``Retry-After`` (a full queue, shutdown …)."""
    return lambda server, request: _problem(503, "busy", {"retry-after": retry_after})


def rate_limited(retry_after: str = "5") -> Answer:
    return lambda server, request: httpx.Response(429, headers={"retry-after": retry_after})


def status(code: int, **headers: str) -> Answer:
    """A bare status with no body: ``502``, ``504``, ``503`` without ``Retry-After`` …"""
    return lambda server, request: httpx.Response(code, headers=headers)


def problem(code: int, reason: str, **extra: Any) -> Answer:
    return lambda server, request: _problem(code, reason, {}, **extra)


def raises(error: type[httpx.TransportError]) -> Answer:
    """The exchange fails before any answer (connect error, timeout …)."""

    def answer(server: ObjectServer, request: httpx.Request) -> httpx.Response:
        raise error("scripted failure", request=request)

    return answer


class _BrokenStream(httpx.SyncByteStream, httpx.AsyncByteStream):
    """A body that delivers ``data`` and then loses the connection."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def __iter__(self) -> Iterator[bytes]:
        if self._data:
            yield self._data
        raise httpx.ReadError("connection dropped mid-body")

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._data:
            yield self._data
        raise httpx.ReadError("connection dropped mid-body")


def dropped_after(nbytes: int) -> Answer:
    """Serve the asked range, but the connection drops after ``nbytes`` of its body."""

    def answer(server: ObjectServer, request: httpx.Request) -> httpx.Response:
        response = server.serve(request)
        body = response.content[:nbytes]
        return httpx.Response(
            response.status_code, headers=response.headers, stream=_BrokenStream(body)
        )

    return answer


def truncated_to(nbytes: int) -> Answer:
    """Serve the asked range with its full ``Content-Length`` but only ``nbytes`` of body."""

    def answer(server: ObjectServer, request: httpx.Request) -> httpx.Response:
        response = server.serve(request)
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=httpx.ByteStream(response.content[:nbytes]),
        )

    return answer


def replaced_by(data: bytes, etag: str) -> Answer:
    """The object is replaced by another version, then this request is served."""

    def answer(server: ObjectServer, request: httpx.Request) -> httpx.Response:
        server.data, server.etag = data, etag
        return server.serve(request)

    return answer


def ignoring_if_range(server: ObjectServer, request: httpx.Request) -> httpx.Response:
    """A broken server (or cache) that serves the range whatever ``If-Range`` says."""
    return server.serve(request, honour_if_range=False)


_RANGE = re.compile(r"bytes=(\d+)-(\d*)")


@dataclass
class ObjectServer:
    """One object with a strong ETag, served with ``Range``/``If-Range``/``206``/``416``.

    Each request consumes the next scripted answer; once the script is empty the object
    is served correctly. Every request is recorded.
    """

    data: bytes
    etag: str = '"v1"'
    script: deque[Answer] = field(default_factory=deque)
    requests: list[httpx.Request] = field(default_factory=list)
    ranges: bool = True

    def then(self, *answers: Answer, times: int = 1) -> ObjectServer:
        for _ in range(times):
            self.script.extend(answers)
        return self

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.script:
            return self.script.popleft()(self, request)
        return self.serve(request)

    def serve(self, request: httpx.Request, *, honour_if_range: bool = True) -> httpx.Response:
        size = len(self.data)
        headers = {"etag": self.etag, "accept-ranges": "bytes"}
        match = _RANGE.fullmatch(request.headers.get("range", ""))
        if_range = request.headers.get("if-range")
        stale = honour_if_range and if_range is not None and if_range != self.etag
        if match is None or stale or not self.ranges:
            return httpx.Response(200, headers=headers, content=self.data)
        first = int(match[1])
        last = min(int(match[2]) if match[2] else size - 1, size - 1)
        if first >= size:
            return httpx.Response(416, headers={**headers, "content-range": f"bytes */{size}"})
        headers["content-range"] = f"bytes {first}-{last}/{size}"
        return httpx.Response(206, headers=headers, content=self.data[first : last + 1])

    def header_values(self, name: str) -> list[str | None]:
        return [request.headers.get(name) for request in self.requests]


# ---------------------------------------------------------------------- the harness
@dataclass
class Harness:
    """Runs a download through the sync or the async client against ``server``."""

    kind: Kind
    server: ObjectServer
    clock: FakeClock = field(default_factory=FakeClock)
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    chunk_size: int = 4
    seed: int = 7
    sleeps: Sleeps = field(init=False)

    def __post_init__(self) -> None:
        self.sleeps = Sleeps(self.clock)

    def download(self, dest: Path, **options: Any) -> DownloadResult:
        """``Client.download`` / ``AsyncClient.download`` with the fakes plugged in."""
        transport = httpx.MockTransport(self.server.handler)
        common: dict[str, Any] = {
            "transport": transport,
            "policy": self.policy,
            "chunk_size": self.chunk_size,
            "clock": self.clock,
            "rng": random.Random(self.seed),
        }
        if self.kind == "sync":
            with Client(sleep=self.sleeps, **common) as client:
                return client.download(URL, dest, **options)

        async def main() -> DownloadResult:
            async with AsyncClient(sleep=self.sleeps.async_sleep, **common) as client:
                return await client.download(URL, dest, **options)

        return anyio.run(main)

    def events(self, dest: Path, **options: Any) -> list[Event]:
        """Every event ``on_event`` received; an exception still propagates."""
        seen: list[Event] = []
        self.download(dest, on_event=seen.append, **options)
        return seen

    def iter_events(self, dest: Path, **options: Any) -> list[Event]:
        """Every event of ``iter_download``."""
        transport = httpx.MockTransport(self.server.handler)
        common: dict[str, Any] = {
            "transport": transport,
            "policy": self.policy,
            "chunk_size": self.chunk_size,
            "clock": self.clock,
            "rng": random.Random(self.seed),
        }
        if self.kind == "sync":
            with Client(sleep=self.sleeps, **common) as client:
                return list(client.iter_download(URL, dest, **options))

        async def main() -> list[Event]:
            async with AsyncClient(sleep=self.sleeps.async_sleep, **common) as client:
                return [event async for event in client.iter_download(URL, dest, **options)]

        return anyio.run(main)


def payload(size: int, seed: int = 1) -> bytes:
    return random.Random(seed).randbytes(size)
