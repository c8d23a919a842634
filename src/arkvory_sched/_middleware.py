"""Pure ASGI middleware: the thin adapter between an artifact server and the scheduler.

Rules of this file: parse, ask the port, write headers, observe the response — no
scheduling policy lives here. It never buffers a body and never sends
``http.response.start`` twice; the application's response streams through untouched
except for two added headers. Every admitted response is reported exactly once, on every
path (completion, client disconnect, application error, cancellation), so the
scheduler's counters return to zero (R-RES-3).

The in-memory scheduler offers a fast path for the two most common requests: a small
object while a per-request place is free (taken synchronously, given back with a byte
count), and a further range of a download session that holds its slot (granted
synchronously with the session's ticket, reported synchronously). Neither builds the
port's request and grant values or awaits. That was about half of what the middleware
cost a small object, and most of its per-range cost on a large download, whose ranges
run with the CPU caches full of the previous range's bytes; the decisions and the
accounting are the scheduler's own, unchanged. Any other case, and any other scheduler
(or a subclass that observes ``admit``, ``report`` or ``progress``), goes through the port.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any

import anyio

from ._classes import DownloadClass
from ._conditional import etag_listed, http_date
from ._core import GrantState
from ._exceptions import InvalidRequestError
from ._memory import InMemoryDownloadScheduler
from ._model import (
    Admitted,
    ByteRange,
    Decision,
    Delivered,
    DeliveryOutcome,
    DownloadRequest,
    Failed,
    Grant,
    Interrupted,
    Queued,
)
from ._port import DownloadScheduler
from ._problems import Answer, bad_request, busy, queued
from ._ranges import Unsatisfiable, first_range
from ._target import DownloadTarget, Resolver
from ._ticking import run_tick_loop

__all__ = ["DownloadSchedulerMiddleware"]

Message = MutableMapping[str, Any]
Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# A long response reports its bytes as it goes, so that the delivery rate behind start
# estimates and the byte counters stay fresh; a response ends with its outcome, which
# counts the rest. 16 MiB is a fifth of a second at 80 MB/s, and more than a range of the
# SDK (8 MiB): such ranges report only their outcome. Each report costs a range tens of
# microseconds on a loaded server, far more than in a tight loop (benchmarks/RESULTS.md).
PROGRESS_EVERY_BYTES = 16 * 1024 * 1024
# The request headers the middleware reads; every other header is skipped unread.
_WANTED = frozenset(
    {
        b"range",
        b"if-range",
        b"if-none-match",
        b"if-modified-since",
        b"arkvory-download-id",
        b"arkvory-download-class",
        b"arkvory-queue-ticket",
    }
)
# The header each admitted response gets, built once per class rather than per response.
_CLASS_HEADERS: dict[DownloadClass, tuple[tuple[bytes, bytes], ...]] = {
    cls: ((b"arkvory-download-class", cls.value.encode("latin-1")),) for cls in DownloadClass
}
_HEADER_FIELDS = {
    "download_class": "Arkvory-Download-Class",
    "download_id": "Arkvory-Download-Id",
    "ticket": "Arkvory-Queue-Ticket",
}
_MAX_HEADER_VALUE = 512
# Fixed details for fields whose scheduler message quotes the client's value: a 400
# never echoes what the client sent.
_INVALID_DETAIL = {
    "download_class": "Arkvory-Download-Class must be one of "
    + ", ".join(cls.value for cls in DownloadClass)
    + "; a client may only lower its class.",
}


class DownloadSchedulerMiddleware:
    """Admit downloads through a :class:`DownloadScheduler` before the app answers them.

    ``resolver`` runs after the host's authorization for each GET and returns a
    :class:`DownloadTarget` or ``None`` (pass through). With ``run_ticks`` (default) the
    middleware runs the scheduler's tick loop for the lifetime of the ASGI lifespan and
    closes the scheduler on shutdown; pass ``False`` when the host runs them itself.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        scheduler: DownloadScheduler,
        resolver: Resolver,
        run_ticks: bool = True,
    ) -> None:
        self.app = app
        self.scheduler = scheduler
        self.resolver = resolver
        self.run_ticks = run_ticks
        self._held = 0

    @property
    def scheduler(self) -> DownloadScheduler:
        return self._scheduler

    @scheduler.setter
    def scheduler(self, scheduler: DownloadScheduler) -> None:
        self._scheduler = scheduler
        self._fast: InMemoryDownloadScheduler | None = None
        if isinstance(scheduler, InMemoryDownloadScheduler) and scheduler.offers_fast_path():
            self._fast = scheduler  # most requests skip the port's values (module docstring)

    @property
    def held(self) -> int:
        """Requests without a download id being held right now (R-HOLD-1)."""
        return self._held

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind != "http" or scope.get("method") != "GET":
            if kind == "lifespan" and self.run_ticks:
                await self._lifespan(scope, receive, send)
            else:
                await self.app(scope, receive, send)  # HEAD, POST, websockets: no place
            return
        target = await self.resolver(scope)
        if target is None:
            await self.app(scope, receive, send)  # not a download, or denied
            return
        headers = _request_headers(scope)
        byte_range: ByteRange | None = None
        if headers is not None:
            if _not_modified(headers, target):
                await self.app(scope, receive, send)  # the app answers 304 (R-SESS-4)
                return
            byte_range = _requested_range(headers, target)
            if byte_range is _UNSATISFIABLE:
                await self.app(scope, receive, send)  # the app answers 416: no place
                return
        fast = self._fast
        place: GrantState | None = None
        decision: Decision | None = None
        try:
            if headers is None:
                download_id = requested = ticket = None  # most small downloads: nothing to read
            else:
                download_id, requested, ticket = _client_fields(headers)
            client = scope.get("client")
            address = str(client[0]) if client else ""
            if fast is not None:
                place = fast.admit_now(
                    target.principal,
                    target.principal_kind,
                    target.base_class,
                    requested,
                    download_id,
                    target.object_id,
                    target.size,
                    address,
                    byte_range,
                )
            if place is None:
                request = DownloadRequest(
                    principal=target.principal,
                    principal_kind=target.principal_kind,
                    object_id=target.object_id,
                    object_size=target.size,
                    byte_range=byte_range,
                    download_id=download_id,
                    client_address=address,
                    requested_class=requested,
                    base_class=target.base_class,
                    ticket=ticket,
                )
                decision = await self._scheduler.admit(request)
                if isinstance(decision, Queued) and download_id is None:
                    decision = await self._hold(request, decision)
        except InvalidRequestError as error:
            field = _HEADER_FIELDS.get(error.field, error.field)
            detail = _INVALID_DETAIL.get(error.field) or error.message.replace(error.field, field)
            await _answer(send, bad_request(field, detail))
            return
        # Every response is served inline rather than in a helper coroutine: a response of
        # a large object suspends at every chunk (file reads, flow control), and each
        # resumption passes through every coroutine frame between the task and the app.
        if place is not None and fast is not None:
            # The fast path's response. Its release is synchronous, so a cancelled request
            # cannot skip it and nothing needs a shield.
            observer = _PlaceObserver(fast, place, send)
            try:
                await self.app(scope, receive, observer.send)
            except BaseException as error:
                if place.session is None:
                    fast.release_per_request(place, observer.sent)
                else:
                    fast.report_range(place, _failure(observer, error))
                raise
            if place.session is None:
                # A per-request place counts only bytes (see counted()).
                fast.release_per_request(place, observer.counted(target.size, byte_range))
            else:
                fast.report_range(place, observer.outcome(target.size, place.byte_range))
        elif isinstance(decision, Admitted):
            grant_observer = _GrantObserver(self._scheduler, decision, send)
            try:
                await self.app(scope, receive, grant_observer.send)
            except BaseException as error:
                # Shielded: a cancelled request must still give its place back (R-RES-3).
                with anyio.CancelScope(shield=True):
                    await self._scheduler.report(decision.grant, _failure(grant_observer, error))
                raise
            # The common path needs no shield (a cancel scope costs more than the report).
            outcome = grant_observer.outcome(target.size, decision.grant.byte_range)
            await self._scheduler.report(decision.grant, outcome)
        elif isinstance(decision, Queued):
            await _answer(send, queued(decision))
        elif decision is not None:
            await _answer(send, busy(decision))

    # ------------------------------------------------------------------ holding
    async def _hold(self, request: DownloadRequest, decision: Queued) -> Decision:
        """Hold a request without an id for up to ``hold_seconds`` before answering 503.

        Third-party tools only see status and ``Retry-After``; many give up or back off
        badly, so the server waits for them as the old queue did (R-HOLD-1). Each pass
        asks the scheduler again, which re-checks strategy and threshold (R-STRAT-4).
        """
        settings = self._scheduler.settings
        if self._held >= settings.transfer_queue_limit or settings.hold_seconds <= 0:
            return decision
        self._held += 1
        try:
            deadline = anyio.current_time() + settings.hold_seconds
            current: Decision = decision
            while isinstance(current, Queued):
                remaining = deadline - anyio.current_time()
                if remaining <= 0:
                    break
                await self._scheduler.wait_for_change(min(remaining, float(current.retry_after)))
                current = await self._scheduler.admit(request)
            return current
        finally:
            self._held -= 1

    # ------------------------------------------------------------------ lifespan
    async def _lifespan(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the tick loop while the application lives; drain on shutdown (R-RES-4).

        An application without lifespan support — it raises or returns without having
        sent any lifespan message — still gets the tick loop: the middleware speaks the
        protocol for it. A failure the application reported itself (such as
        ``lifespan.startup.failed``) is re-raised, never answered with ``complete``.
        """
        state = {"started": False, "shutdown": False, "answered": False}
        failure: Exception | None = None
        async with anyio.create_task_group() as tasks:

            async def observed_receive() -> Message:
                message = await receive()
                if message["type"] == "lifespan.startup" and not state["started"]:
                    state["started"] = True
                    tasks.start_soon(run_tick_loop, self._scheduler)
                elif message["type"] == "lifespan.shutdown":
                    state["shutdown"] = True
                    await self._scheduler.close()
                return message

            async def observed_send(message: Message) -> None:
                state["answered"] = True
                await send(message)

            try:
                try:
                    await self.app(scope, observed_receive, observed_send)
                except Exception as error:
                    if state["answered"]:
                        failure = error  # re-raised outside the task group, unwrapped
                if failure is None and not state["answered"]:
                    # The application has no lifespan support: speak the protocol for it.
                    while not state["started"]:
                        await observed_receive()
                    await send({"type": "lifespan.startup.complete"})
                    while not state["shutdown"]:
                        await observed_receive()
                    await send({"type": "lifespan.shutdown.complete"})
            finally:
                tasks.cancel_scope.cancel()
        if failure is not None:
            raise failure


class _ResponseObserver:
    """Wraps ``send`` for one admitted response: adds headers, counts bytes, reports
    progress, and knows at the end whether the response was delivered in full.

    ``finished`` is whether the body's last message (``more_body`` false) went out.
    """

    __slots__ = ("_extra", "_progress_at", "_send", "disconnected", "finished", "sent",
                 "status")  # fmt: skip

    def __init__(self, send: Send, extra: tuple[tuple[bytes, bytes], ...]) -> None:
        self._send = send
        self._extra = extra
        self._progress_at = PROGRESS_EVERY_BYTES
        self.finished = False
        self.status = 0
        self.sent = 0
        self.disconnected = False

    async def send(self, message: Message) -> None:
        # The body path comes first and does as little as it can: a multi-gigabyte
        # response passes through here once per chunk, and in a real server each
        # operation here costs several times what it costs in a tight loop (the 8 MiB
        # benchmark in RESULTS.md). Only a flag of the message is kept, never the
        # message: holding it would keep its chunk alive until the next one is sent, a
        # second chunk per response in memory (``finished`` says whether the body ended).
        if message["type"] == "http.response.body":
            try:
                await self._send(message)
            except Exception:
                self.disconnected = True
                raise
            # Counted once sent: bytes a gone client never got are not delivered.
            self.sent = sent = self.sent + len(message.get("body", b""))
            more = message.get("more_body", False)
            self.finished = not more
            if more and sent >= self._progress_at:
                # Everything since the last report; the next one after another 16 MiB. The
                # body's last message needs none: the outcome, reported next, counts it.
                reported = self._progress_at - PROGRESS_EVERY_BYTES
                self._progress_at = sent + PROGRESS_EVERY_BYTES
                await self._progress(sent - reported)
            return
        if message["type"] == "http.response.start":
            self.status = int(message["status"])
            # A copy: the app may send the same header list again (a reused response).
            message = {**message, "headers": [*message.get("headers", ()), *self._extra]}
        try:
            await self._send(message)
        except Exception:
            self.disconnected = True
            raise

    async def _progress(self, nbytes: int) -> None:
        raise NotImplementedError

    def outcome(self, size: int, granted: ByteRange | None) -> DeliveryOutcome:
        """Delivered only when the body went out in full with a 200/206 status: the
        ``granted`` range for a 206, the whole object for a 200."""
        if not self.finished:
            return Interrupted(self.sent)
        if self.status == 206:
            return Delivered(granted)
        if self.status == 200:
            return Delivered(ByteRange.whole(size) if size else None)
        if self.status >= 500:
            return Failed(self.sent)
        return Interrupted(self.sent)


class _GrantObserver(_ResponseObserver):
    """The observer of a response admitted through the port."""

    __slots__ = ("_grant", "_scheduler")

    def __init__(self, scheduler: DownloadScheduler, decision: Admitted, send: Send) -> None:
        grant = decision.grant
        extra = _CLASS_HEADERS[grant.download_class]
        if decision.ticket is not None:
            extra = (*extra, (b"arkvory-queue-ticket", decision.ticket.encode()))
        super().__init__(send, extra)
        self._scheduler = scheduler
        self._grant: Grant = grant

    async def _progress(self, nbytes: int) -> None:
        await self._scheduler.progress(self._grant, nbytes)


class _PlaceObserver(_ResponseObserver):
    """The observer of a response on the fast path: a per-request place, or a range of
    an active session (with the session's ticket)."""

    __slots__ = ("_fast", "_place")

    def __init__(self, fast: InMemoryDownloadScheduler, place: GrantState, send: Send) -> None:
        # Every field set here rather than through super(): one call fewer per small object.
        self._send = send
        extra = _CLASS_HEADERS[place.download_class]
        if place.ticket is not None:
            extra = (*extra, (b"arkvory-queue-ticket", place.ticket.encode()))
        self._extra = extra
        self._progress_at = PROGRESS_EVERY_BYTES
        self.finished = False
        self.status = 0
        self.sent = 0
        self.disconnected = False
        self._fast = fast
        self._place = place

    async def _progress(self, nbytes: int) -> None:
        self._fast.progress_now(self._place, nbytes)

    def counted(self, size: int, byte_range: ByteRange | None) -> int:
        """The bytes :meth:`outcome` would stand for: a ``Delivered``
        (the body went out in full with a 200/206 status) counts the granted range, or
        the whole object without one; anything else counts the bytes sent."""
        status = self.status
        if not self.finished or status not in (200, 206):
            return self.sent
        if status == 206 and byte_range is not None:
            return byte_range.length
        return size


_UNSATISFIABLE = ByteRange(0, 1)  # sentinel identity, never sent to the scheduler


def _requested_range(headers: Mapping[bytes, str], target: DownloadTarget) -> ByteRange | None:
    """The range the app will serve: the first of a Range header the app will honour."""
    header = headers.get(b"range")
    if header is None:
        return None
    holds = _if_range_holds(headers.get(b"if-range"), target.etag)
    if holds is False:
        return None  # the app will send the whole (changed) object
    found = first_range(header, target.size)
    if isinstance(found, Unsatisfiable):
        # A 416 takes no place, but only when the app cannot answer 200 with the whole.
        return _UNSATISFIABLE if holds else None
    return found


def _if_range_holds(if_range: str | None, etag: str | None) -> bool | None:
    """Will the app honour the Range? ``None`` when only the app can tell (an HTTP-date,
    or no ETag known). Predicting a range the app then ignores is safe — its ``200`` is
    counted as the whole object — but counting an unknown ``206`` as whole is not."""
    if if_range is None:
        return True
    value = if_range.strip()
    if etag is None or not value.startswith(('"', "W/")):
        return None
    return value == etag and not value.startswith("W/")  # strong comparison only


def _not_modified(headers: Mapping[bytes, str], target: DownloadTarget) -> bool:
    """Whether the app will answer 304 (RFC 9110 §13.2.2): such a request takes no place.

    ``If-None-Match`` decides when present; otherwise ``If-Modified-Since`` against the
    target's ``Last-Modified``.
    """
    if_none_match = headers.get(b"if-none-match")
    if if_none_match is not None:
        return target.etag is not None and etag_listed(if_none_match, target.etag, weak=True)
    if_modified_since = headers.get(b"if-modified-since")
    if if_modified_since is None or target.last_modified is None:
        return False
    since = http_date(if_modified_since)
    modified = http_date(target.last_modified)
    return since is not None and modified is not None and modified <= since


def _request_headers(scope: Scope) -> dict[bytes, str] | None:
    """The few request headers the middleware reads, decoded once (the first of each).

    ``None`` when the request has none of them, as most downloads of small objects do:
    then nothing needs to be looked up or validated.
    """
    found: dict[bytes, str] | None = None
    for name, value in scope.get("headers", ()):
        # Servers pass bytes (copied only if one passes a bytearray, which is unhashable).
        key = (name if type(name) is bytes else bytes(name)).lower()
        if key in _WANTED:
            if found is None:
                found = {key: bytes(value).decode("latin-1")}
            elif key not in found:
                found[key] = bytes(value).decode("latin-1")
    return found


_NO_FIELDS: tuple[None, None, None] = (None, None, None)


def _client_fields(
    headers: Mapping[bytes, str] | None,
) -> tuple[str | None, str | None, str | None]:
    """The download id (stripped), requested class and ticket a client sent.

    Raises :class:`InvalidRequestError` for an id or class that is too long or not
    printable; a ticket that is too long is ignored (the download queues anew).
    """
    if headers is None:
        return _NO_FIELDS
    download_id = headers.get(b"arkvory-download-id")
    requested = headers.get(b"arkvory-download-class")
    ticket = headers.get(b"arkvory-queue-ticket")
    for field, value in (("download_id", download_id), ("download_class", requested)):
        if value is not None and (len(value) > _MAX_HEADER_VALUE or not value.isprintable()):
            raise InvalidRequestError(field, f"{field} is too long or not printable")
    if ticket is not None and len(ticket) > _MAX_HEADER_VALUE:
        ticket = None
    return (download_id.strip() if download_id is not None else None), requested, ticket


def _failure(observer: _ResponseObserver, error: BaseException) -> DeliveryOutcome:
    """The outcome of a response that ended in ``error``: a failed send means the client
    is gone, whatever the app turned it into (Starlette raises ClientDisconnect under
    ASGI 2.4), as does a cancellation; anything else is the app's failure."""
    interrupted = observer.disconnected or isinstance(
        error, OSError | anyio.get_cancelled_exc_class()
    )
    return Interrupted(observer.sent) if interrupted else Failed(observer.sent)


async def _answer(send: Send, answer: Answer) -> None:
    status, headers, body = answer
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
