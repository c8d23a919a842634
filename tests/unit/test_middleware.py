"""The ASGI middleware end to end, in front of real Starlette and FastAPI applications.

Every test runs the real :class:`InMemoryDownloadScheduler` on a :class:`FakeClock` (the
queue's time moves only when a test says so) behind :class:`DownloadSchedulerMiddleware`,
in front of a small artifact server written twice — once as a Starlette app, once as a
FastAPI app — that serves in-memory objects with ETag, Last-Modified, ``Range``/``206``/
``Content-Range``, ``If-Range``, ``If-None-Match``/``304``, ``HEAD`` and ``416``.

Requests go through ``httpx.ASGITransport`` where httpx can express them; requests it
refuses to build (CR/LF in a header), client disconnects and cancellation use a
hand-built ASGI scope, ``receive`` and ``send`` so that every message on the wire can be
counted. The rules proven: R-SESS-4 (what takes no place), R-SESS-5 and SPEC §16 (the
503 contract), R-CLASS-4, R-SESS-11, R-HOLD-1, R-STRAT-4, R-RES-3 (every path reports,
counters return to zero) and R-RES-4 (shutdown).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from email.utils import formatdate
from functools import partial
from typing import Any

import anyio
import httpx
import pytest
from fastapi import FastAPI
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from arkvory_sched import (
    ByteRange,
    Clock,
    Decision,
    Delivered,
    DeliveryOutcome,
    DownloadClass,
    DownloadRequest,
    Failed,
    Grant,
    InMemoryDownloadScheduler,
    Interrupted,
    PrincipalKind,
    Queued,
    RangeKind,
    SchedulerSettings,
    SchedulerStats,
    SystemClock,
    TickReport,
    generate_key,
)
from arkvory_sched._target import DownloadTarget, Resolver, Scope
from arkvory_sched.asgi._asgi import ASGIApp, Message
from arkvory_sched.asgi._middleware import DownloadSchedulerMiddleware
from arkvory_sched.asgi._ranges import Satisfiable, Unsatisfiable, content_range, parse_range
from arkvory_sched.memory._core import SchedulerCore
from arkvory_sched.policy import AT_THE_DOOR_RECHECK_SECONDS, NEWCOMER_CHECK_SECONDS
from arkvory_sched.testing import FakeClock

from ._helpers import SteppingClock

MIB = 1024 * 1024
CHUNK = MIB  # the test apps stream bodies in 1 MiB messages
RANGE = 8 * MIB  # the SDK's range size
BIG = random.Random(20_240_601).randbytes(40 * MIB)  # above the 16 MiB session threshold
SMALL = random.Random(7).randbytes(1 * MIB)  # below it: admitted per request
LAST_MODIFIED = formatdate(1_700_000_000, usegmt=True)
HOLD = 0.3  # transfer_queue_wait_seconds, and so the default hold (R-HOLD-1)
#: A hold for the tests in which a held request must be answered before its hold ends:
#: one that waited for the end would take ten minutes, far beyond :data:`SETTLE_SECONDS`.
LONG_HOLD = 600.0
#: How long a test waits for what happens at once in one process: only a hang (or a
#: request waiting out a :data:`LONG_HOLD`) takes this long, however slow the machine.
SETTLE_SECONDS = 30.0
DENIED = "mallory"
CLASS_HEADER = "arkvory-download-class"
TICKET_HEADER = "arkvory-queue-ticket"
TICKET_RE = re.compile(r"2\.[0-9a-z]+\.[0-9a-z]+\.[A-Za-z0-9_-]+")
STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"
# A cold server without a configured rate says its start is a guess (ADR 0042).
STARTS_AT_RE = re.compile(rf"({STAMP}); earliest=({STAMP}); latest=({STAMP})(?:; basis=guess)?")
ALLOWED_STATUSES = {200, 206, 304, 400, 416, 503}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


# ====================================================================== the artifact app
def etag_of(name: str) -> str:
    return f'"{name}-v1"'


def not_modified(if_none_match: str | None, etag: str) -> bool:
    """RFC 9110 §13.1.2: weak comparison, ``*`` matches any current representation."""
    if if_none_match is None:
        return False
    tags = [tag.strip() for tag in if_none_match.split(",")]
    return any(tag == "*" or tag.removeprefix("W/") == etag.removeprefix("W/") for tag in tags)


def if_range_holds(if_range: str | None, etag: str) -> bool:
    """RFC 9110 §13.1.5: a strong ETag, or exactly the Last-Modified date."""
    if if_range is None:
        return True
    value = if_range.strip()
    if value.startswith(('"', "W/")):
        return value == etag
    return value == LAST_MODIFIED


def principal_of(authorization: str | None) -> str | None:
    if authorization is None or not authorization.startswith("Bearer "):
        return None
    return authorization.removeprefix("Bearer ").strip() or None


@dataclass
class ObjectStore:
    """What the test apps serve, and knobs that make them pause or fail mid-body."""

    objects: dict[str, bytes] = field(default_factory=lambda: {"big": BIG, "small": SMALL})
    gate: anyio.Event | None = None  # when set up, bodies wait for it …
    pause_at_chunk: int = 0  # … before sending this chunk
    fail_at_chunk: int | None = None  # raise instead of sending this chunk (0: before start)
    log: list[str] = field(default_factory=list)

    def size(self, name: str) -> int | None:
        data = self.objects.get(name)
        return None if data is None else len(data)

    async def stream(self, name: str, start: int, end: int) -> AsyncIterator[bytes]:
        data = self.objects[name]
        for index, offset in enumerate(range(start, end, CHUNK)):
            if self.gate is not None and index == self.pause_at_chunk:
                await self.gate.wait()
            if self.fail_at_chunk is not None and index == self.fail_at_chunk:
                raise RuntimeError("storage read failed")
            self.log.append(f"app {index}")
            yield data[offset : min(end, offset + CHUNK)]


def make_app(
    kind: str,
    store: ObjectStore,
    lifespan: Callable[[Any], Any] | None = None,
) -> ASGIApp:
    """The same artifact server as a Starlette or as a FastAPI application."""

    async def serve_object(request: Request) -> Response:
        name = str(request.path_params["name"])
        user = principal_of(request.headers.get("authorization"))
        if user is None or user == DENIED:
            return PlainTextResponse("forbidden", status_code=403)
        size = store.size(name)
        if size is None:
            return PlainTextResponse("not found", status_code=404)
        etag = etag_of(name)
        validators = {"etag": etag, "last-modified": LAST_MODIFIED, "accept-ranges": "bytes"}
        if_none_match = request.headers.get("if-none-match")
        unchanged_since = if_none_match is None and (
            request.headers.get("if-modified-since") == LAST_MODIFIED
        )
        if not_modified(if_none_match, etag) or unchanged_since:
            return Response(status_code=304, headers=validators)
        if request.method == "HEAD":
            return Response(headers={**validators, "content-length": str(size)})
        if store.fail_at_chunk == 0:
            raise RuntimeError("metadata lookup failed")
        range_header = request.headers.get("range")
        start, end, status = 0, size, 200
        headers = dict(validators)
        if range_header is not None and if_range_holds(request.headers.get("if-range"), etag):
            parsed = parse_range(range_header, size)
            if isinstance(parsed, Unsatisfiable):
                headers["content-range"] = parsed.content_range
                return Response(b"", status_code=416, headers=headers)
            if isinstance(parsed, Satisfiable):
                first = parsed.ranges[0]  # the first range only: never multipart here
                start, end, status = first.start, first.end, 206
                headers["content-range"] = content_range(first, size)
        headers["content-length"] = str(end - start)
        return StreamingResponse(
            store.stream(name, start, end),
            status_code=status,
            headers=headers,
            media_type="application/octet-stream",
        )

    async def health(request: Request) -> Response:
        return PlainTextResponse("ok", headers={"cache-control": "no-cache"})

    if kind == "starlette":
        return Starlette(
            routes=[
                Route("/objects/{name}", serve_object, methods=["GET", "HEAD"]),
                Route("/health", health, methods=["GET"]),
            ],
            lifespan=lifespan,
        )
    app = FastAPI(lifespan=lifespan)
    app.add_api_route("/objects/{name}", serve_object, methods=["GET", "HEAD"])
    app.add_api_route("/health", health, methods=["GET"])
    return app


def make_resolver(store: ObjectStore) -> Resolver:
    """Authorization and metadata first; ``None`` for anything that is not a download."""

    async def resolve(scope: Scope) -> DownloadTarget | None:
        path = str(scope.get("path", ""))
        if not path.startswith("/objects/"):
            return None
        name = path.removeprefix("/objects/")
        raw = dict(scope.get("headers", [])).get(b"authorization")
        user = principal_of(None if raw is None else bytes(raw).decode("latin-1"))
        if user is None or user == DENIED:
            return None
        size = store.size(name)
        if size is None:
            return None
        kind = PrincipalKind.PERSON if user.startswith("person-") else PrincipalKind.SERVICE
        return DownloadTarget(
            principal=user,
            principal_kind=kind,
            object_id=name,
            size=size,
            etag=etag_of(name),
            last_modified=LAST_MODIFIED,
        )

    return resolve


# ====================================================================== the harness
class RecordingScheduler(InMemoryDownloadScheduler):
    """The real in-memory scheduler, remembering every outcome reported, every tick and
    every wait for a change: how long the caller was ready to wait, and how many
    requests the middleware (once :attr:`middleware` is set) held at that moment."""

    def __init__(self, settings: SchedulerSettings, clock: Clock) -> None:
        super().__init__(settings, clock=clock, ticket_keys=[generate_key()])
        self.outcomes: list[DeliveryOutcome] = []
        self.progressed: list[int] = []
        self.ticks = 0
        self.waits: list[float] = []
        self.door_waits: list[float] = []  # wait_at_the_door's (not in waits)
        self.held_at_waits: list[int] = []
        self.middleware: DownloadSchedulerMiddleware | None = None

    async def wait_for_change(self, timeout: float) -> None:
        self.waits.append(timeout)
        if self.middleware is not None:
            self.held_at_waits.append(self.middleware.held)
        await super().wait_for_change(timeout)

    async def wait_at_the_door(self, timeout: float) -> None:
        self.door_waits.append(timeout)
        if self.middleware is not None:
            self.held_at_waits.append(self.middleware.held)
        await super().wait_for_change(timeout)

    async def progress(self, grant: Grant, nbytes: int) -> None:
        self.progressed.append(nbytes)
        await super().progress(grant, nbytes)

    async def report(self, grant: Grant, outcome: DeliveryOutcome) -> None:
        self.outcomes.append(outcome)
        await super().report(grant, outcome)

    async def tick(self) -> TickReport:
        self.ticks += 1
        return await super().tick()


def scheduler_settings(**changes: Any) -> SchedulerSettings:
    """One session slot, no reserve, share or preemption: each test adds only its rule."""
    values: dict[str, Any] = {
        "sessions": 1,
        "reserve": 0,
        "per_principal": 1,
        "preempt": False,
        "aging_minutes": 0.0,
        "max_downloads": 2,
        "transfer_queue_limit": 4,
        "transfer_queue_per_principal": 4,
        "transfer_queue_wait_seconds": HOLD,
    }
    values.update(changes)
    return SchedulerSettings(**values)


@dataclass
class Harness:
    kind: str
    store: ObjectStore
    clock: FakeClock
    scheduler: RecordingScheduler
    app: ASGIApp
    middleware: DownloadSchedulerMiddleware

    @property
    def core(self) -> SchedulerCore:
        return self.scheduler.core

    def client(
        self,
        address: str = "192.0.2.10",
        *,
        bare: bool = False,
        raise_app_exceptions: bool = True,
    ) -> httpx.AsyncClient:
        """A client of the middleware (or, with ``bare``, of the app without it)."""
        transport = httpx.ASGITransport(
            app=self.app if bare else self.middleware,
            client=(address, 40_000),
            raise_app_exceptions=raise_app_exceptions,
        )
        return httpx.AsyncClient(transport=transport, base_url="http://artifacts.test")

    async def stats(self) -> SchedulerStats:
        return await self.scheduler.stats()


def build(
    kind: str,
    store: ObjectStore | None = None,
    *,
    clock: FakeClock | None = None,
    **settings: Any,
) -> Harness:
    store = store or ObjectStore()
    clock = clock or FakeClock()
    scheduler = RecordingScheduler(scheduler_settings(**settings), clock)
    app = make_app(kind, store)
    middleware = DownloadSchedulerMiddleware(
        app, scheduler=scheduler, resolver=make_resolver(store), run_ticks=False
    )
    scheduler.middleware = middleware
    return Harness(kind, store, clock, scheduler, app, middleware)


Build = Callable[..., Harness]


@pytest.fixture(params=["starlette", "fastapi"])
def make(request: pytest.FixtureRequest) -> Build:
    """Builds a harness around the parametrized app; keywords are scheduler settings."""
    kind = str(request.param)

    def factory(store: ObjectStore | None = None, **settings: Any) -> Harness:
        return build(kind, store, **settings)

    return factory


def byte_span(start: int, end: int) -> str:
    """``Range`` value for ``[start, end)``."""
    return f"bytes={start}-{end - 1}"


async def fetch(
    client: httpx.AsyncClient,
    name: str = "big",
    *,
    user: str = "svc-ci",
    download_id: str | None = None,
    byte_range: str | None = None,
    method: str = "GET",
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    sent = {"authorization": f"Bearer {user}"}
    if download_id is not None:
        sent["arkvory-download-id"] = download_id
    if byte_range is not None:
        sent["range"] = byte_range
    sent.update(headers or {})
    return await client.request(method, f"/objects/{name}", headers=sent)


def problem(response: httpx.Response) -> dict[str, Any]:
    assert response.headers["content-type"] == "application/problem+json"
    document = json.loads(response.content)
    assert isinstance(document, dict)
    assert document["status"] == response.status_code
    return document


def arkvory_headers(response: httpx.Response) -> set[str]:
    return {name for name in response.headers if name.startswith("arkvory-")}


async def eventually(predicate: Callable[[], bool], timeout: float = SETTLE_SECONDS) -> None:
    with anyio.fail_after(timeout):
        while not predicate():
            await anyio.sleep(0.005)


def place_counters(stats: SchedulerStats, core: SchedulerCore) -> tuple[int, ...]:
    """Everything a request that takes a place would move."""
    return (
        stats.admitted_total,
        stats.active,
        stats.waiting,
        stats.request_active,
        stats.request_waiting,
        core.session_count,
        core.grants_in_flight(),
    )


async def occupy_the_slot(client: httpx.AsyncClient, user: str = "svc-first") -> None:
    """A protocol client takes the only session slot with its first range and keeps it."""
    response = await fetch(client, user=user, download_id="first", byte_range=byte_span(0, RANGE))
    assert response.status_code == 206
    assert response.content == BIG[:RANGE]


async def finish_first(client: httpx.AsyncClient, user: str = "svc-first") -> None:
    response = await fetch(client, user=user, download_id="first", byte_range=f"bytes={RANGE}-")
    assert response.status_code == 206
    assert response.content == BIG[RANGE:]


async def held_until_the_slot_frees(
    harness: Harness,
    client: httpx.AsyncClient,
    request: Callable[[], Awaitable[httpx.Response]],
) -> httpx.Response:
    """Send ``request``, free the first slot once the middleware holds it, and return
    its answer, which comes during the hold, not at its end."""
    answers: list[httpx.Response] = []
    with anyio.fail_after(SETTLE_SECONDS):
        async with anyio.create_task_group() as tasks:

            async def held() -> None:
                answers.append(await request())

            tasks.start_soon(held)
            await eventually(lambda: harness.middleware.held == 1)
            await finish_first(client)
            await harness.scheduler.tick()
    (response,) = answers
    return response


# ====================================================================== raw ASGI
class RawClient:
    """One request through a hand-built scope; records every message the client gets.

    ``fail_on_body`` makes ``send`` raise ``OSError`` (connection reset) on that body
    message, which then never reaches the client. ``receive`` answers the request body
    once, then waits for :meth:`disconnect`.
    """

    def __init__(
        self,
        path: str = "/objects/big",
        *,
        headers: list[tuple[bytes, bytes]] | None = None,
        method: str = "GET",
        spec_version: str = "2.3",
        fail_on_body: int | None = None,
        log: list[str] | None = None,
    ) -> None:
        self.path = path
        self.headers = [(b"authorization", b"Bearer svc-ci"), *(headers or [])]
        self.method = method
        self.spec_version = spec_version
        self.fail_on_body = fail_on_body
        self.log = log
        self.messages: list[Message] = []
        self._requested = False
        self._disconnected = anyio.Event()
        self._body_attempts = 0

    def scope(self) -> Scope:
        return {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": self.spec_version},
            "http_version": "1.1",
            "method": self.method,
            "scheme": "http",
            "path": self.path,
            "raw_path": self.path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": self.headers,
            "client": ("192.0.2.20", 50_000),
            "server": ("artifacts.test", 80),
        }

    async def receive(self) -> Message:
        if not self._requested:
            self._requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await self._disconnected.wait()
        return {"type": "http.disconnect"}

    def disconnect(self) -> None:
        self._disconnected.set()

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.body":
            self._body_attempts += 1
            if self._body_attempts == self.fail_on_body:
                raise OSError("connection reset by peer")
            if self.log is not None and message.get("body"):
                self.log.append(f"client {self.body_messages}")
        self.messages.append(message)

    async def __call__(self, app: DownloadSchedulerMiddleware) -> None:
        await app(self.scope(), self.receive, self.send)

    @property
    def starts(self) -> list[Message]:
        return [m for m in self.messages if m["type"] == "http.response.start"]

    @property
    def status(self) -> int:
        (start,) = self.starts
        return int(start["status"])

    @property
    def response_headers(self) -> list[tuple[bytes, bytes]]:
        (start,) = self.starts
        return [(bytes(k), bytes(v)) for k, v in start.get("headers", [])]

    @property
    def body_messages(self) -> int:
        return sum(m["type"] == "http.response.body" for m in self.messages)

    @property
    def body(self) -> bytes:
        return b"".join(
            bytes(m.get("body", b"")) for m in self.messages if m["type"] == "http.response.body"
        )


# ====================================================================== R-SESS-4: no place
@pytest.mark.anyio
async def test_non_download_route_passes_through_untouched(make: Build) -> None:
    harness = make()
    before = place_counters(await harness.stats(), harness.core)
    async with harness.client() as client, harness.client(bare=True) as bare:
        response = await client.get("/health")
        expected = await bare.get("/health")
    assert response.status_code == 200
    assert response.text == "ok"
    assert response.headers.multi_items() == expected.headers.multi_items()
    assert place_counters(await harness.stats(), harness.core) == before


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("user", "name", "status"),
    [(DENIED, "big", 403), ("svc-ci", "missing", 404)],
    ids=["denied", "unknown-object"],
)
async def test_request_the_resolver_refuses_passes_through_and_takes_no_place(
    make: Build, user: str, name: str, status: int
) -> None:
    harness = make()
    async with harness.client() as client, harness.client(bare=True) as bare:
        await occupy_the_slot(client)  # even with every slot taken: never queued
        before = place_counters(await harness.stats(), harness.core)
        response = await fetch(client, name, user=user, download_id="d1")
        expected = await fetch(bare, name, user=user, download_id="d1")
    assert response.status_code == status
    assert response.headers.multi_items() == expected.headers.multi_items()
    assert response.content == expected.content
    assert place_counters(await harness.stats(), harness.core) == before


@pytest.mark.anyio
async def test_head_takes_no_place(make: Build) -> None:
    harness = make()
    async with harness.client() as client:
        await occupy_the_slot(client)
        before = place_counters(await harness.stats(), harness.core)
        response = await fetch(client, method="HEAD", user="svc-other", download_id="d2")
    assert response.status_code == 200
    assert response.headers["content-length"] == str(len(BIG))
    assert response.headers["etag"] == etag_of("big")
    assert response.content == b""
    assert arkvory_headers(response) == set()
    assert place_counters(await harness.stats(), harness.core) == before


@pytest.mark.anyio
@pytest.mark.parametrize(
    "if_none_match",
    [etag_of("big"), f"W/{etag_of('big')}", "*", f'"other", {etag_of("big")}'],
    ids=["strong", "weak", "any", "list"],
)
async def test_not_modified_takes_no_place(make: Build, if_none_match: str) -> None:
    harness = make()
    async with harness.client() as client:
        await occupy_the_slot(client)
        before = place_counters(await harness.stats(), harness.core)
        response = await fetch(
            client,
            user="svc-other",
            download_id="d3",
            byte_range=byte_span(0, RANGE),
            headers={"if-none-match": if_none_match},
        )
    assert response.status_code == 304
    assert response.content == b""
    assert arkvory_headers(response) == set()
    assert place_counters(await harness.stats(), harness.core) == before


@pytest.mark.anyio
async def test_if_modified_since_alone_answers_304_without_a_place(make: Build) -> None:
    harness = make()
    async with harness.client() as client:
        await occupy_the_slot(client)
        before = place_counters(await harness.stats(), harness.core)
        response = await fetch(
            client,
            user="svc-other",
            download_id="d4",
            byte_range=byte_span(0, RANGE),
            headers={"if-modified-since": LAST_MODIFIED},
        )
    assert response.status_code == 304
    assert place_counters(await harness.stats(), harness.core) == before


@pytest.mark.anyio
async def test_older_if_modified_since_is_a_download_that_queues(make: Build) -> None:
    harness = make()
    async with harness.client() as client:
        await occupy_the_slot(client)
        response = await fetch(
            client,
            user="svc-other",
            download_id="d5",
            byte_range=byte_span(0, RANGE),
            headers={"if-modified-since": "Mon, 01 Jan 2001 00:00:00 GMT"},
        )
    assert response.status_code == 503
    assert problem(response)["reason"] == "download_queued"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("byte_range", "if_range"),
    [
        (f"bytes={len(BIG)}-", None),
        ("bytes=50000000-60000000", None),
        (f"bytes={len(BIG) + 5}-, {len(BIG) + 9}-", None),
        (f"bytes={len(BIG)}-", etag_of("big")),
    ],
    ids=["at-end", "beyond", "all-specs-miss", "if-range-holds"],
)
async def test_unsatisfiable_range_takes_no_place(
    make: Build, byte_range: str, if_range: str | None
) -> None:
    harness = make()
    async with harness.client() as client:
        await occupy_the_slot(client)
        before = place_counters(await harness.stats(), harness.core)
        response = await fetch(
            client,
            user="svc-other",
            download_id="d4",
            byte_range=byte_range,
            headers={} if if_range is None else {"if-range": if_range},
        )
    assert response.status_code == 416
    assert response.headers["content-range"] == f"bytes */{len(BIG)}"
    assert arkvory_headers(response) == set()
    assert place_counters(await harness.stats(), harness.core) == before


@pytest.mark.anyio
@pytest.mark.parametrize(
    "if_range",
    ['"big-v0"', f"W/{etag_of('big')}", formatdate(1_600_000_000, usegmt=True)],
    ids=["old-etag", "weak-etag", "old-date"],
)
async def test_stale_if_range_is_admitted_even_with_an_unsatisfiable_range(
    make: Build, if_range: str
) -> None:
    """The app ignores the Range of a changed object and sends it whole: that is a
    download, so it must take a place, not slip past the queue as a 416 would."""
    harness = make()
    async with harness.client() as client:
        response = await fetch(
            client,
            download_id="d5",
            byte_range=f"bytes={len(BIG)}-",
            headers={"if-range": if_range},
        )
    assert response.status_code == 200
    assert response.content == BIG
    assert TICKET_RE.fullmatch(response.headers[TICKET_HEADER])
    stats = await harness.stats()
    assert stats.admitted_total == 1
    assert stats.completed_total == 1
    assert stats.active == 0


# ====================================================================== admitted
@pytest.mark.anyio
async def test_admitted_range_gets_class_and_ticket_and_identical_body(make: Build) -> None:
    harness = make()
    async with harness.client() as client, harness.client(bare=True) as bare:
        span = byte_span(3 * RANGE + 17, 4 * RANGE + 17)
        response = await fetch(client, download_id="dl-1", byte_range=span)
        expected = await fetch(bare, download_id="dl-1", byte_range=span)
    assert response.status_code == 206
    assert response.content == BIG[3 * RANGE + 17 : 4 * RANGE + 17]
    assert response.headers["content-range"] == (
        f"bytes {3 * RANGE + 17}-{4 * RANGE + 16}/{len(BIG)}"
    )
    assert response.headers[CLASS_HEADER] == "release"
    assert TICKET_RE.fullmatch(response.headers[TICKET_HEADER])
    # Only the two headers are added; the app's own headers pass untouched.
    added = [(k, v) for k, v in response.headers.multi_items() if k.startswith("arkvory-")]
    assert len(added) == 2
    own = [(k, v) for k, v in response.headers.multi_items() if not k.startswith("arkvory-")]
    assert own == expected.headers.multi_items()
    stats = await harness.stats()
    assert (stats.admitted_total, stats.active, harness.core.grants_in_flight()) == (1, 1, 0)
    (outcome,) = harness.scheduler.outcomes
    assert isinstance(outcome, Delivered)
    assert outcome.byte_range is not None
    assert (outcome.byte_range.start, outcome.byte_range.end) == (3 * RANGE + 17, 4 * RANGE + 17)


@pytest.mark.anyio
async def test_whole_object_without_range_is_delivered_and_completes(make: Build) -> None:
    harness = make()
    async with harness.client() as client:
        response = await fetch(client)  # a third-party tool: no id, no Range
    assert response.status_code == 200
    assert response.content == BIG
    assert response.headers[CLASS_HEADER] == "release"
    stats = await harness.stats()
    assert (stats.completed_total, stats.active, stats.waiting) == (1, 0, 0)
    assert isinstance(harness.scheduler.outcomes[-1], Delivered)


@pytest.mark.anyio
async def test_queued_session_gets_503_with_queue_headers_then_a_slot(make: Build) -> None:
    harness = make()
    async with harness.client() as client:
        await occupy_the_slot(client)
        first = await fetch(client, user="svc-second", download_id="second", byte_range="bytes=0-")

        assert first.status_code == 503
        assert first.headers["retry-after"].isdigit()
        assert int(first.headers["retry-after"]) >= 1
        starts = STARTS_AT_RE.fullmatch(first.headers["arkvory-starts-at"])
        assert starts is not None, first.headers["arkvory-starts-at"]
        point, earliest, latest = (datetime.fromisoformat(s) for s in starts.groups())
        assert earliest <= point <= latest
        assert TICKET_RE.fullmatch(first.headers[TICKET_HEADER])
        assert first.headers[CLASS_HEADER] == "release"
        assert first.headers["arkvory-queue-position"] == "1"  # a newcomer's too (R-EST-3)
        assert first.headers["cache-control"] == "no-store"
        document = problem(first)
        assert document["reason"] == "download_queued"
        assert document["startsAt"] == starts.group(1)
        guessed = first.headers["arkvory-starts-at"].endswith("basis=guess")
        assert document["startsGuessed"] is guessed
        assert document["retryAfter"] == int(first.headers["retry-after"])

        await harness.scheduler.tick()
        again = await fetch(
            client,
            user="svc-second",
            download_id="second",
            byte_range="bytes=0-",
            headers={TICKET_HEADER: first.headers[TICKET_HEADER]},
        )
        assert again.status_code == 503
        assert again.headers["arkvory-queue-position"] == "1"
        assert problem(again)["position"] == 1

        await finish_first(client)
        assert (await harness.stats()).active == 0
        await harness.scheduler.tick()  # marks the waiter for the freed slot (R-SESS-12)
        admitted = await fetch(
            client,
            user="svc-second",
            download_id="second",
            byte_range="bytes=0-",
            headers={TICKET_HEADER: again.headers[TICKET_HEADER]},
        )
    assert admitted.status_code == 206
    assert admitted.content == BIG
    assert TICKET_RE.fullmatch(admitted.headers[TICKET_HEADER])
    stats = await harness.stats()
    assert (stats.completed_total, stats.active, stats.waiting) == (2, 0, 0)
    assert harness.core.grants_in_flight() == 0


# ====================================================================== R-CLASS-4
@pytest.mark.anyio
@pytest.mark.parametrize(
    ("user", "requested", "applied"),
    [
        ("svc-ci", "bulk", "bulk"),
        ("svc-ci", "interactive", "release"),  # a class is only ever lowered
        ("svc-ci", "BACKGROUND", "background"),
        ("svc-ci", None, "release"),
        ("person-ann", None, "interactive"),
        ("person-ann", "release", "release"),
    ],
)
async def test_download_class_is_lowered_only_and_echoed(
    make: Build, user: str, requested: str | None, applied: str
) -> None:
    harness = make()
    async with harness.client() as client:
        response = await fetch(
            client,
            user=user,
            download_id="dl-1",
            byte_range=byte_span(0, RANGE),
            headers={} if requested is None else {"arkvory-download-class": requested},
        )
    assert response.status_code == 206
    assert response.headers[CLASS_HEADER] == applied
    stats = await harness.stats()
    assert stats.per_class[DownloadClass(applied)].active == 1


@pytest.mark.anyio
@pytest.mark.parametrize("value", ["turbo", "interactive!", "<b>bulk</b>"])
async def test_unknown_download_class_is_a_400_naming_the_header(make: Build, value: str) -> None:
    harness = make()
    async with harness.client() as client:
        response = await fetch(
            client, download_id="dl-1", headers={"arkvory-download-class": value}
        )
    assert response.status_code == 400
    document = problem(response)
    assert document["reason"] == "invalid_request"
    assert document["field"] == "Arkvory-Download-Class"
    assert value not in response.text  # the offending value is never echoed
    assert place_counters(await harness.stats(), harness.core) == (0, 0, 0, 0, 0, 0, 0)


@pytest.mark.anyio
@pytest.mark.parametrize(
    "value",
    [
        b"abc\r\nSet-Cookie: stolen=1",
        b"abc\nx-injected: 1",
        b"abc\rdef",
        b"abc\x00def",
        b"a" * 200,
        b"b" * 600,
        b"\xe9t\xe9",
    ],
    ids=["crlf", "lf", "cr", "nul", "200-chars", "600-chars", "non-ascii"],
)
async def test_malformed_download_id_is_a_400_that_never_echoes_it(
    make: Build, value: bytes
) -> None:
    harness = make()
    raw = RawClient(headers=[(b"arkvory-download-id", value)])
    await raw(harness.middleware)
    assert raw.status == 400
    assert len(raw.starts) == 1
    assert (b"content-type", b"application/problem+json") in raw.response_headers
    document = json.loads(raw.body)
    assert document["field"] == "Arkvory-Download-Id"
    assert document["reason"] == "invalid_request"
    shown = value[:5]
    assert shown not in raw.body
    assert all(shown not in header_value for _, header_value in raw.response_headers)
    assert place_counters(await harness.stats(), harness.core) == (0, 0, 0, 0, 0, 0, 0)


@pytest.mark.anyio
async def test_overlong_download_id_through_httpx(make: Build) -> None:
    harness = make()
    async with harness.client() as client:
        response = await fetch(client, download_id="x" * 200)
    assert response.status_code == 400
    assert problem(response)["field"] == "Arkvory-Download-Id"
    assert "x" * 20 not in response.text


# ====================================================================== R-HOLD-1
@pytest.mark.anyio
async def test_request_without_id_is_held_then_gets_an_honest_503(make: Build) -> None:
    harness = make()
    async with harness.client() as client:
        await occupy_the_slot(client)
        started = anyio.current_time()
        with anyio.fail_after(SETTLE_SECONDS):
            response = await fetch(client, user="svc-tool")  # curl, docker: no id
        elapsed = anyio.current_time() - started
    # Held for the hold: not less, and never asking to wait beyond what was left of it
    # (so not longer either, but for the time the machine took to run it).
    assert elapsed >= HOLD - 0.05
    waits = harness.scheduler.waits + harness.scheduler.door_waits  # next in line: the door
    assert waits, "the request was not held"
    assert max(waits) <= HOLD + 1e-6  # (floating-point slack)
    assert response.status_code == 503
    assert int(response.headers["retry-after"]) >= 1
    assert problem(response)["reason"] == "download_queued"
    assert harness.middleware.held == 0
    assert (await harness.stats()).active == 1


@pytest.mark.anyio
async def test_held_request_is_admitted_when_a_slot_frees(make: Build) -> None:
    harness = make(hold_seconds=LONG_HOLD)
    async with harness.client() as client:
        await occupy_the_slot(client)
        response = await held_until_the_slot_frees(
            harness, client, partial(fetch, client, user="svc-tool")
        )
    assert response.status_code == 200
    assert response.content == BIG
    assert harness.middleware.held == 0
    stats = await harness.stats()
    assert (stats.completed_total, stats.active, stats.waiting) == (2, 0, 0)


@pytest.mark.anyio
async def test_a_protocol_waiter_at_the_door_takes_the_slot_the_moment_it_frees(
    make: Build,
) -> None:
    """R-HOLD-2: a client with a download id in the next round, whose slot may free
    within the hold, is held like a tool without one; as a newcomer only until its
    first answer is due (2 s, R-EST-3: ADR 0038); a waiter further back is answered at
    once."""
    harness = make(hold_seconds=LONG_HOLD, sessions=1)
    async with harness.client() as client:
        await occupy_the_slot(client)
        started = anyio.current_time()
        with anyio.fail_after(SETTLE_SECONDS):
            newcomer = await fetch(client, user="svc-second", download_id="second")
        assert anyio.current_time() - started >= NEWCOMER_CHECK_SECONDS - 0.05
        assert harness.scheduler.door_waits, "the newcomer was not held at the door"
        with anyio.fail_after(SETTLE_SECONDS):  # the second in line: not at the door
            behind = await fetch(client, user="svc-third", download_id="third")
        assert (newcomer.status_code, behind.status_code) == (503, 503)
        assert newcomer.headers["arkvory-queue-position"] == "1"
        await harness.scheduler.tick()
        with anyio.fail_after(SETTLE_SECONDS):
            again = await fetch(
                client,
                user="svc-third",
                download_id="third",
                headers={TICKET_HEADER: behind.headers[TICKET_HEADER]},
            )
        assert again.status_code == 503
        assert again.headers["arkvory-queue-position"] == "2"
        at_the_door = partial(
            fetch,
            client,
            user="svc-second",
            download_id="second",
            headers={TICKET_HEADER: newcomer.headers[TICKET_HEADER]},
        )
        response = await held_until_the_slot_frees(harness, client, at_the_door)
    assert response.status_code == 200
    assert response.content == BIG
    assert harness.middleware.held == 0


@pytest.mark.anyio
async def test_a_held_newcomer_told_no_place_is_told_none_at_the_end_of_its_hold(
    make: Build, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ADR 0017 point 5: a shared store tells a newcomer no place, since sessions that
    arrive at once on several processes commit out of order. The re-asks of its hold
    are polls and read a place; the answer at the end of the hold is still the first,
    and names none either (the fleet test saw a place told so grow from 20 to 31)."""
    harness = make(hold_seconds=LONG_HOLD, sessions=1)
    scheduler = harness.scheduler
    asked: set[str | None] = set()
    admit = scheduler.admit

    async def admit_as_a_shared_store(request: DownloadRequest) -> Decision:
        decision = await admit(request)
        newcomer = request.download_id not in asked
        asked.add(request.download_id)
        if newcomer and isinstance(decision, Queued):
            return replace(decision, position=None)
        return decision

    monkeypatch.setattr(scheduler, "admit", admit_as_a_shared_store)
    async with harness.client() as client:
        await occupy_the_slot(client)
        with anyio.fail_after(SETTLE_SECONDS):
            newcomer = await fetch(client, user="svc-second", download_id="second")
    assert scheduler.door_waits, "the newcomer was not held at the door"
    assert newcomer.status_code == 503
    assert "arkvory-queue-position" not in newcomer.headers
    assert json.loads(newcomer.content).get("position") is None


@pytest.mark.anyio
async def test_a_tool_at_the_door_waits_there_and_one_behind_it_waits_for_any_change(
    make: Build,
) -> None:
    """A request without an id that is next in line waits as a protocol client at the
    door does: woken by a slot freed in any process of a shared store, and asking again
    at least every AT_THE_DOOR_RECHECK_SECONDS (ADR 0037); the tool behind it waits for
    any change, up to its Retry-After."""
    harness = make(hold_seconds=LONG_HOLD, sessions=1)
    answers: dict[str, httpx.Response] = {}
    async with harness.client() as client:
        await occupy_the_slot(client)
        with anyio.fail_after(SETTLE_SECONDS):
            async with anyio.create_task_group() as tasks:

                async def held(user: str) -> None:
                    answers[user] = await fetch(client, user=user)

                tasks.start_soon(held, "svc-next")
                await eventually(lambda: bool(harness.scheduler.door_waits))
                tasks.start_soon(held, "svc-behind")
                await eventually(lambda: harness.middleware.held == 2)
                await eventually(lambda: bool(harness.scheduler.waits))
                assert max(harness.scheduler.door_waits) <= AT_THE_DOOR_RECHECK_SECONDS
                assert min(harness.scheduler.waits) > AT_THE_DOOR_RECHECK_SECONDS
                await harness.scheduler.tick()  # marks the next in line
                await finish_first(client)
                await eventually(lambda: "svc-next" in answers)
                tasks.cancel_scope.cancel()
    assert answers["svc-next"].status_code == 200
    assert answers["svc-next"].content == BIG


@pytest.mark.anyio
async def test_at_most_transfer_queue_limit_requests_are_held(make: Build) -> None:
    harness = make(hold_seconds=LONG_HOLD, transfer_queue_limit=1, transfer_queue_per_principal=1)
    async with harness.client() as client:
        await occupy_the_slot(client)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(partial(fetch, client, user="svc-tool-1"))
            await eventually(lambda: harness.middleware.held == 1)
            with anyio.fail_after(SETTLE_SECONDS):  # answered at once, not after a hold
                extra = await fetch(client, user="svc-tool-2")
            assert harness.middleware.held == 1
            tasks.cancel_scope.cancel()
    assert extra.status_code == 503
    # Not held for a moment either: no wait ever began with two requests held.
    assert harness.scheduler.held_at_waits, "the first request was not held"
    assert max(harness.scheduler.held_at_waits) == 1
    assert int(extra.headers["retry-after"]) >= 1
    assert problem(extra)["reason"] == "download_queued"
    assert harness.middleware.held == 0


@pytest.mark.anyio
@pytest.mark.parametrize(
    "change",
    [{"strategy": "shared"}, {"session_min_bytes": 64 * MIB}],
    ids=["switch-to-shared", "raised-threshold"],
)
async def test_held_request_rechecks_strategy_and_threshold(
    make: Build, change: dict[str, Any]
) -> None:
    harness = make(hold_seconds=LONG_HOLD)
    answers: list[httpx.Response] = []
    async with harness.client() as client:
        await occupy_the_slot(client)
        with anyio.fail_after(SETTLE_SECONDS):  # admitted during the hold, not at its end
            async with anyio.create_task_group() as tasks:

                async def held() -> None:
                    answers.append(await fetch(client, user="svc-tool"))

                tasks.start_soon(held)
                await eventually(lambda: harness.middleware.held == 1)
                await harness.scheduler.configure(harness.scheduler.settings.with_changes(**change))
        (response,) = answers
        assert response.status_code == 200
        assert response.content == BIG
        assert response.headers[CLASS_HEADER] == "release"
        assert TICKET_HEADER not in response.headers  # admitted per request: no session
        # R-STRAT-4: the active session is not interrupted and keeps being served.
        assert (await harness.stats()).active == 1
        await finish_first(client)
    stats = await harness.stats()
    assert (stats.active, stats.request_active, harness.core.grants_in_flight()) == (0, 0, 0)


# ====================================================================== per request
@pytest.mark.anyio
async def test_small_object_is_admitted_per_request_beside_full_slots(make: Build) -> None:
    harness = make()
    async with harness.client() as client:
        await occupy_the_slot(client)  # every session slot is taken …
        response = await fetch(client, "small", user="svc-other")  # … small does not wait
    assert response.status_code == 200
    assert response.content == SMALL
    assert response.headers[CLASS_HEADER] == "release"
    assert TICKET_HEADER not in response.headers
    stats = await harness.stats()
    assert (stats.request_active, stats.request_waiting, stats.active) == (0, 0, 1)
    assert harness.core.session_count == 1  # the small download made no session


@pytest.mark.anyio
async def test_per_request_waiter_gets_the_place_that_frees(make: Build) -> None:
    harness = make(max_downloads=1, transfer_queue_wait_seconds=10.0)
    harness.store.gate = anyio.Event()
    answers: dict[str, httpx.Response] = {}
    async with harness.client() as client, anyio.create_task_group() as tasks:

        async def small(user: str) -> None:
            answers[user] = await fetch(client, "small", user=user)

        tasks.start_soon(small, "svc-a")
        await eventually(lambda: harness.core.stats().request_active == 1)
        tasks.start_soon(small, "svc-b")
        await eventually(lambda: harness.core.stats().request_waiting == 1)
        harness.store.gate.set()
    assert [answers[u].status_code for u in ("svc-a", "svc-b")] == [200, 200]
    assert answers["svc-b"].content == SMALL
    stats = await harness.stats()
    assert (stats.request_active, stats.request_waiting, harness.core.grants_in_flight()) == (
        0,
        0,
        0,
    )


@pytest.mark.anyio
async def test_per_request_wait_expires_with_busy_503(make: Build) -> None:
    harness = make(max_downloads=1)
    harness.store.gate = anyio.Event()
    async with harness.client() as client, anyio.create_task_group() as tasks:
        tasks.start_soon(partial(fetch, client, "small", user="svc-a"))
        await eventually(lambda: harness.core.stats().request_active == 1)
        started = anyio.current_time()
        late = await fetch(client, "small", user="svc-b")
        elapsed = anyio.current_time() - started
        harness.store.gate.set()
    assert late.status_code == 503
    assert elapsed >= HOLD - 0.05
    document = problem(late)
    assert document["reason"] == "busy"
    assert document["busyReason"] == "request_wait_expired"
    assert int(late.headers["retry-after"]) >= 1
    assert (await harness.stats()).request_active == 0


# ====================================================================== R-SESS-11
@pytest.mark.anyio
async def test_fifth_concurrent_response_of_one_session_is_busy(make: Build) -> None:
    harness = make()
    harness.store.gate = anyio.Event()
    answers: dict[int, httpx.Response] = {}
    async with harness.client() as client:
        async with anyio.create_task_group() as tasks:

            async def part(index: int) -> None:
                span = byte_span(index * RANGE, (index + 1) * RANGE)
                answers[index] = await fetch(client, download_id="nat", byte_range=span)

            for index in range(4):
                tasks.start_soon(part, index)
            await eventually(lambda: harness.core.grants_in_flight() == 4)
            fifth = await fetch(client, download_id="nat", byte_range=f"bytes={4 * RANGE}-")
            harness.store.gate.set()
        assert fifth.status_code == 503
        document = problem(fifth)
        assert document["reason"] == "busy"
        assert document["busyReason"] == "ranges_per_session"
        assert fifth.headers["retry-after"] == "1"
        for index in range(4):
            assert answers[index].status_code == 206
            assert answers[index].content == BIG[index * RANGE : (index + 1) * RANGE]
        assert harness.core.grants_in_flight() == 0
        assert (await harness.stats()).active == 1
        last = await fetch(client, download_id="nat", byte_range=f"bytes={4 * RANGE}-")
    assert last.status_code == 206
    stats = await harness.stats()
    assert (stats.active, stats.completed_total) == (0, 1)


# ====================================================================== R-RES-3 reporting
@pytest.mark.anyio
async def test_full_delivery_in_ranges_completes_the_session(make: Build) -> None:
    harness = make()
    received = b""
    async with harness.client() as client:
        for index in range(5):
            response = await fetch(
                client,
                download_id="ranges",
                byte_range=byte_span(index * RANGE, (index + 1) * RANGE),
            )
            assert response.status_code == 206
            received += response.content
            stats = await harness.stats()
            assert stats.active == (1 if index < 4 else 0)
    assert received == BIG
    stats = await harness.stats()
    assert (stats.completed_total, stats.active, stats.waiting) == (1, 0, 0)
    assert harness.core.grants_in_flight() == 0
    assert harness.core.session_count == 0
    assert all(isinstance(o, Delivered) for o in harness.scheduler.outcomes)
    assert len(harness.scheduler.outcomes) == 5


async def _ranges_ending_on_their_last_chunk(scope: Scope, receive: Any, send: Any) -> None:
    """A range of ``big`` in 1 MiB messages, the last one ending the body (the shape of
    Starlette's ``FileResponse``; ``StreamingResponse`` ends with an empty message)."""
    parsed = parse_range(dict(scope["headers"])[b"range"].decode(), len(BIG))
    assert isinstance(parsed, Satisfiable)
    first = parsed.ranges[0]
    await send({"type": "http.response.start", "status": 206, "headers": []})
    for offset in range(first.start, first.end, CHUNK):
        end = min(first.end, offset + CHUNK)
        await send(
            {"type": "http.response.body", "body": BIG[offset:end], "more_body": end < first.end}
        )


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("length", "step", "expected"),
    [
        (40 * MIB, 0.01, []),
        (8 * MIB, 0.5, [3 * MIB, 2 * MIB, 2 * MIB]),
        (32 * MIB, 0.5, [3 * MIB] + [2 * MIB] * 14),
        (40 * MIB, 0.5, [3 * MIB] + [2 * MIB] * 18),
    ],
    ids=["within-a-second", "an-8-MiB-range-at-2-MiB-per-second", "ends-at-32-MiB", "40-MiB"],
)
async def test_progress_once_a_second_and_the_rest_with_the_outcome(
    length: int, step: float, expected: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Progress goes out at most once a second while the body streams, looked at once per
    MiB (the first MiB starts the clock): here a MiB every half second. A response
    that ends within a second reports only its outcome; the body's last message
    reports nothing itself: the outcome right after it counts the rest, once."""
    monkeypatch.setattr("arkvory_sched.asgi._observer.monotonic", SteppingClock(step))
    harness = build("starlette")
    harness.middleware.app = _ranges_ending_on_their_last_chunk
    async with harness.client() as client:
        response = await fetch(client, download_id="progress", byte_range=byte_span(0, length))
    assert (response.status_code, response.content) == (206, BIG[:length])
    assert harness.scheduler.progressed == expected
    assert harness.scheduler.outcomes == [Delivered(ByteRange(0, length, RangeKind.BOUNDED))]
    stats = await harness.stats()
    assert stats.per_class[DownloadClass.RELEASE].bytes_delivered == length


@pytest.mark.anyio
@pytest.mark.parametrize("at_chunk", [0, 3], ids=["before-response", "mid-body"])
async def test_app_exception_is_reported_failed(make: Build, at_chunk: int) -> None:
    harness = make()
    harness.store.fail_at_chunk = at_chunk
    raw = RawClient(headers=[(b"arkvory-download-id", b"dl-1")])
    with pytest.raises(RuntimeError):
        await raw(harness.middleware)
    assert len(raw.starts) == 1  # the middleware never starts a second response
    if at_chunk == 0:
        assert raw.status == 500  # the framework's error page, passed through
    else:
        assert raw.status == 200
        assert raw.body == BIG[: at_chunk * CHUNK]
        assert raw.messages[-1].get("more_body") is True  # never completed
    outcome = harness.scheduler.outcomes[-1]
    assert isinstance(outcome, Failed)
    assert harness.core.grants_in_flight() == 0
    stats = await harness.stats()
    assert stats.completed_total == 0
    # The failed download gives up its slot after the short hold (R-RES-3).
    harness.clock.advance(6.0)
    await harness.scheduler.tick()
    stats = await harness.stats()
    assert (stats.active, stats.waiting) == (0, 0)


@pytest.mark.anyio
async def test_app_exception_through_httpx_answers_500_and_releases(make: Build) -> None:
    harness = make()
    harness.store.fail_at_chunk = 0
    async with harness.client(raise_app_exceptions=False) as client:
        response = await fetch(client, "small")
    assert response.status_code == 500
    assert isinstance(harness.scheduler.outcomes[-1], Failed)
    stats = await harness.stats()
    assert (stats.request_active, harness.core.grants_in_flight()) == (0, 0)


@pytest.mark.anyio
@pytest.mark.parametrize("spec_version", ["2.3", "2.4"])
async def test_client_disconnect_mid_body_is_interrupted_and_counts_no_bytes(
    make: Build, spec_version: str
) -> None:
    harness = make()
    raw = RawClient(
        headers=[(b"arkvory-download-id", b"dl-1")], spec_version=spec_version, fail_on_body=2
    )
    with pytest.raises((OSError, ClientDisconnect)):
        await raw(harness.middleware)
    assert len(raw.starts) == 1
    assert raw.status == 200
    assert raw.body == BIG[:CHUNK]  # one chunk got out, the second failed
    outcome = harness.scheduler.outcomes[-1]
    assert isinstance(outcome, Interrupted)
    assert outcome.bytes_sent == CHUNK
    assert harness.core.grants_in_flight() == 0
    stats = await harness.stats()
    assert stats.per_class[DownloadClass.RELEASE].bytes_delivered == CHUNK
    assert (stats.active, stats.completed_total) == (1, 0)
    # None of the interrupted bytes count, and the dropped request does not pin the
    # start either: resuming after the bytes the client kept completes (R-SESS-8).
    async with harness.client() as client:
        rest = await fetch(client, download_id="dl-1", byte_range=f"bytes={CHUNK}-")
        assert rest.status_code == 206
    stats = await harness.stats()
    assert (stats.active, stats.completed_total) == (0, 1)


@pytest.mark.anyio
async def test_client_disconnect_message_is_interrupted(make: Build) -> None:
    """A server that reports the disconnect through ``receive`` (ASGI < 2.4)."""
    harness = make()
    harness.store.gate = anyio.Event()
    harness.store.pause_at_chunk = 1
    raw = RawClient(headers=[(b"arkvory-download-id", b"dl-1")])
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(raw, harness.middleware)
        await eventually(lambda: raw.body_messages == 1)
        raw.disconnect()
    assert isinstance(harness.scheduler.outcomes[-1], Interrupted)
    assert harness.core.grants_in_flight() == 0
    assert (await harness.stats()).completed_total == 0


@pytest.mark.anyio
async def test_cancelled_request_is_reported(make: Build) -> None:
    harness = make()
    harness.store.gate = anyio.Event()
    harness.store.pause_at_chunk = 1
    raw = RawClient(headers=[(b"arkvory-download-id", b"dl-1")])
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(raw, harness.middleware)
        await eventually(lambda: raw.body_messages == 1)
        assert harness.core.grants_in_flight() == 1
        tasks.cancel_scope.cancel()
    assert len(raw.starts) == 1
    outcome = harness.scheduler.outcomes[-1]
    assert isinstance(outcome, Interrupted)
    assert harness.core.grants_in_flight() == 0
    harness.clock.advance(6.0)
    await harness.scheduler.tick()
    stats = await harness.stats()
    assert (stats.active, stats.waiting, stats.completed_total) == (0, 0, 0)


@pytest.mark.anyio
async def test_cancelled_hold_releases_its_place(make: Build) -> None:
    harness = make(hold_seconds=LONG_HOLD)
    async with harness.client() as client:
        await occupy_the_slot(client)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(partial(fetch, client, user="svc-tool"))
            await eventually(lambda: harness.middleware.held == 1)
            tasks.cancel_scope.cancel()
    assert harness.middleware.held == 0
    assert harness.core.grants_in_flight() == 0


@pytest.mark.anyio
async def test_streams_without_buffering_and_starts_once(make: Build) -> None:
    huge = bytes(64 * MIB)
    store = ObjectStore(objects={"huge": huge})
    harness = make(store)
    app_messages: list[str] = []

    async def counting_app(scope: Scope, receive: Any, send: Any) -> None:
        async def counted(message: Message) -> None:
            app_messages.append(str(message["type"]))
            await send(message)

        await harness.app(scope, receive, counted)

    middleware = DownloadSchedulerMiddleware(
        counting_app,
        scheduler=harness.scheduler,
        resolver=make_resolver(store),
        run_ticks=False,
    )
    raw = RawClient("/objects/huge", headers=[(b"arkvory-download-id", b"big")], log=store.log)
    await raw(middleware)
    chunks = len(huge) // CHUNK
    assert raw.status == 200
    assert len(raw.starts) == 1
    assert raw.body_messages == app_messages.count("http.response.body") == chunks + 1
    assert raw.messages[-1].get("more_body", False) is False
    # Each chunk reached the client before the app produced the next one.
    expected = [entry for i in range(chunks) for entry in (f"app {i}", f"client {i}")]
    assert store.log == expected
    assert len(raw.body) == len(huge)
    stats = await harness.stats()
    assert (stats.completed_total, stats.active) == (1, 0)
    assert stats.per_class[DownloadClass.RELEASE].bytes_delivered == len(huge)


@pytest.mark.anyio
async def test_if_range_by_date_counts_only_the_range_served(make: Build) -> None:
    """An If-Range date the middleware cannot judge: the app's 206 must not be taken for
    the whole object, or the session would complete after its first range (R-SESS-8)."""
    harness = make()
    async with harness.client() as client:
        response = await fetch(
            client,
            download_id="dl-1",
            byte_range=byte_span(0, RANGE),
            headers={"if-range": LAST_MODIFIED},
        )
        assert response.status_code == 206
        assert response.content == BIG[:RANGE]
        stats = await harness.stats()
        assert (stats.active, stats.completed_total) == (1, 0)
        # A date that no longer holds: the app sends the whole object, which completes.
        whole = await fetch(
            client,
            download_id="dl-1",
            byte_range=byte_span(RANGE, 2 * RANGE),
            headers={"if-range": formatdate(1_600_000_000, usegmt=True)},
        )
    assert whole.status_code == 200
    assert whole.content == BIG
    stats = await harness.stats()
    assert (stats.active, stats.completed_total) == (0, 1)


# ====================================================================== R-RES-4 shutdown
@pytest.mark.anyio
async def test_after_close_waiters_get_shutting_down_and_active_sessions_finish(
    make: Build,
) -> None:
    harness = make(hold_seconds=LONG_HOLD)
    answers: list[httpx.Response] = []
    async with harness.client() as client:
        await occupy_the_slot(client)
        with anyio.fail_after(SETTLE_SECONDS):  # a newcomer: at the door until its 2 s
            waiting = await fetch(client, user="svc-second", download_id="second")
        assert waiting.status_code == 503
        async with anyio.create_task_group() as tasks:

            async def held() -> None:
                answers.append(await fetch(client, user="svc-tool"))

            tasks.start_soon(held)
            await eventually(lambda: harness.middleware.held == 1)
            with anyio.fail_after(SETTLE_SECONDS):  # the held request was woken …
                await harness.scheduler.close()
                await eventually(lambda: harness.middleware.held == 0)  # … not held to the end
        again = await fetch(client, user="svc-second", download_id="second")
        newcomer = await fetch(client, user="svc-third", download_id="third")
        small = await fetch(client, "small", user="svc-fourth")
        next_range = await fetch(
            client, download_id="first", user="svc-first", byte_range=byte_span(RANGE, 2 * RANGE)
        )
        assert next_range.status_code == 206
        assert next_range.content == BIG[RANGE : 2 * RANGE]
        await finish_first(client)
    for response in (*answers, again, newcomer, small):
        assert response.status_code == 503
        document = problem(response)
        assert document["reason"] == "busy"
        assert document["busyReason"] == "shutting_down"
        assert int(response.headers["retry-after"]) >= 1
    stats = await harness.stats()
    assert stats.closed
    assert (stats.active, stats.completed_total, harness.core.grants_in_flight()) == (0, 1, 0)


# ====================================================================== lifespan
class LifespanServer:
    """Plays the server's side of the ASGI lifespan protocol by hand."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self._to_app, self._from_server = anyio.create_memory_object_stream[Message](4)

    def scope(self) -> Scope:
        return {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": {}}

    async def receive(self) -> Message:
        return await self._from_server.receive()

    async def send(self, message: Message) -> None:
        self.sent.append(str(message["type"]))

    async def push(self, kind: str) -> None:
        await self._to_app.send({"type": kind})

    async def wait_for(self, kind: str) -> None:
        await eventually(lambda: kind in self.sent)

    def close(self) -> None:
        self._to_app.close()
        self._from_server.close()


def system_scheduler() -> RecordingScheduler:
    return RecordingScheduler(scheduler_settings(), SystemClock())


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["starlette", "fastapi"])
async def test_lifespan_runs_the_tick_loop_and_closes_on_shutdown(kind: str) -> None:
    events: list[str] = []

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        events.append("startup")
        yield
        events.append(f"shutdown, scheduler closed: {scheduler.core.closed}")

    scheduler = system_scheduler()
    store = ObjectStore()
    middleware = DownloadSchedulerMiddleware(
        make_app(kind, store, lifespan), scheduler=scheduler, resolver=make_resolver(store)
    )
    server = LifespanServer()
    with anyio.fail_after(SETTLE_SECONDS):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(middleware, server.scope(), server.receive, server.send)
            await server.push("lifespan.startup")
            await server.wait_for("lifespan.startup.complete")
            assert events == ["startup"]
            await eventually(lambda: scheduler.ticks >= 2)  # ticking every 500 ms
            assert (await scheduler.stats()).last_tick_seconds > 0
            assert not (await scheduler.stats()).closed
            await server.push("lifespan.shutdown")
            await server.wait_for("lifespan.shutdown.complete")
    server.close()
    assert server.sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert events == ["startup", "shutdown, scheduler closed: True"]
    assert (await scheduler.stats()).closed
    ticks = scheduler.ticks
    await anyio.sleep(0.6)
    assert scheduler.ticks == ticks  # the loop ended with the lifespan


async def _raises_at_once(scope: Scope, receive: Any, send: Any) -> None:
    assert scope["type"] == "http", "this app knows only HTTP"


async def _returns_at_once(scope: Scope, receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return


async def _receives_then_raises(scope: Scope, receive: Any, send: Any) -> None:
    message = await receive()
    raise RuntimeError(f"unexpected {message['type']}")


@pytest.mark.anyio
@pytest.mark.parametrize(
    "app",
    [_raises_at_once, _returns_at_once, _receives_then_raises],
    ids=["raises", "returns", "receives-then-raises"],
)
async def test_lifespan_is_spoken_for_an_app_without_lifespan_support(app: ASGIApp) -> None:
    scheduler = system_scheduler()
    middleware = DownloadSchedulerMiddleware(
        app, scheduler=scheduler, resolver=make_resolver(ObjectStore())
    )
    server = LifespanServer()
    with anyio.fail_after(SETTLE_SECONDS):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(middleware, server.scope(), server.receive, server.send)
            await server.push("lifespan.startup")
            await server.wait_for("lifespan.startup.complete")
            await eventually(lambda: scheduler.ticks >= 1)
            await server.push("lifespan.shutdown")
            await server.wait_for("lifespan.shutdown.complete")
    server.close()
    assert server.sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert (await scheduler.stats()).closed


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["starlette", "fastapi"])
async def test_lifespan_startup_failure_is_not_masked(kind: str) -> None:
    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        raise RuntimeError("database unreachable")
        yield

    store = ObjectStore()
    middleware = DownloadSchedulerMiddleware(
        make_app(kind, store, lifespan), scheduler=system_scheduler(), resolver=make_resolver(store)
    )
    server = LifespanServer()
    await server.push("lifespan.startup")
    with (
        anyio.fail_after(SETTLE_SECONDS),
        pytest.raises(RuntimeError, match="database unreachable"),
    ):
        await middleware(server.scope(), server.receive, server.send)
    server.close()
    assert server.sent == ["lifespan.startup.failed"]


@pytest.mark.anyio
async def test_lifespan_passes_through_when_the_host_runs_ticks() -> None:
    scheduler = system_scheduler()
    store = ObjectStore()
    middleware = DownloadSchedulerMiddleware(
        make_app("starlette", store),
        scheduler=scheduler,
        resolver=make_resolver(store),
        run_ticks=False,
    )
    server = LifespanServer()
    await server.push("lifespan.startup")
    await server.push("lifespan.shutdown")
    with anyio.fail_after(SETTLE_SECONDS):
        await middleware(server.scope(), server.receive, server.send)
    server.close()
    assert server.sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert scheduler.ticks == 0
    assert not (await scheduler.stats()).closed


# ====================================================================== hypothesis
_PRINTABLE = st.characters(codec="latin-1", exclude_categories=["Cc"])
_TEXT = st.text(_PRINTABLE, max_size=40)
_SMALL_BIG = random.Random(3).randbytes(48 * 1024)
_RANGES = st.one_of(
    _TEXT,
    st.builds("bytes={}-{}".format, st.integers(0, 60_000), st.integers(0, 60_000)),
    st.builds("bytes={}-".format, st.integers(0, 60_000)),
    st.builds("bytes=-{}".format, st.integers(0, 60_000)),
    st.sampled_from(["bytes=0-1,5-9", "BYTES=3-", "bytes= 5-", "items=0-1", "bytes=-", ""]),
)
_VALIDATORS = st.one_of(
    _TEXT,
    st.sampled_from([etag_of("big"), f"W/{etag_of('big')}", "*", LAST_MODIFIED, '"x", *']),
)
_CLASSES = st.one_of(_TEXT, st.sampled_from([c.value for c in DownloadClass]))
_IDS = st.one_of(_TEXT, st.sampled_from(["dl-1", "a" * 128, "a" * 129, " dl "]))


def _optional(strategy: st.SearchStrategy[str]) -> st.SearchStrategy[str | None]:
    return st.none() | strategy


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["starlette", "fastapi"])
@hypothesis_settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    byte_range=_optional(_RANGES),
    if_range=_optional(_VALIDATORS),
    if_none_match=_optional(_VALIDATORS),
    download_id=_optional(_IDS),
    download_class=_optional(_CLASSES),
    ticket=_optional(_TEXT),
)
async def test_arbitrary_header_values_never_break_the_middleware(
    kind: str,
    byte_range: str | None,
    if_range: str | None,
    if_none_match: str | None,
    download_id: str | None,
    download_class: str | None,
    ticket: str | None,
) -> None:
    store = ObjectStore(objects={"big": _SMALL_BIG, "small": SMALL[:1024]})
    harness = build(kind, store, session_min_bytes=16 * 1024, hold_seconds=0.0)
    values = {
        "range": byte_range,
        "if-range": if_range,
        "if-none-match": if_none_match,
        "arkvory-download-id": download_id,
        "arkvory-download-class": download_class,
        "arkvory-queue-ticket": ticket,
    }
    headers = [(b"authorization", b"Bearer svc-ci")]
    headers += [
        (name.encode(), value.encode("latin-1"))
        for name, value in values.items()
        if value is not None
    ]
    async with harness.client() as client:
        # Once with a free slot, once behind a session that holds it.
        first = await client.get("/objects/big", headers=headers)
        blocker = await fetch(client, user="svc-blocker", download_id="b", byte_range="bytes=0-9")
        second = await client.get("/objects/big", headers=headers)
        small = await client.get("/objects/small", headers=headers)
    for response in (first, second, small):
        assert response.status_code in ALLOWED_STATUSES, response.text
        if response.status_code in (400, 503):
            assert problem(response)["reason"] in {"invalid_request", "download_queued", "busy"}
    assert blocker.status_code in {206, 503}
    assert harness.core.grants_in_flight() == 0
    assert harness.core.debug_invariants() == []


def test_module_objects_straddle_the_session_threshold() -> None:
    threshold = SchedulerSettings().session_min_bytes
    assert len(SMALL) < threshold < len(BIG)
    assert len(BIG) % RANGE == 0
