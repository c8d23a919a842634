"""Pure ASGI middleware: the thin adapter between an artifact server and the scheduler.

Rules of this file: parse, ask the port, write headers, observe the response — no
scheduling policy lives here. It never buffers a body and never sends
``http.response.start`` twice; the application's response streams through untouched
except for two added headers. Every admitted response is reported exactly once, on every
path (completion, client disconnect, application error, cancellation), so the
scheduler's counters return to zero (R-RES-3).

The middleware knows only the :class:`DownloadScheduler` port. When the scheduler offers
the port's optional :class:`FastPath` (the in-memory one does), the two most common
requests take it: a small object while a per-request place is free (taken
synchronously, given back with a byte count), and a further range of a download session
that holds its slot (granted synchronously with the session's ticket, reported
synchronously). Neither builds the port's request and grant values or awaits. That was
about half of what the middleware cost a small object, and most of its per-range cost on
a large download, whose ranges run with the CPU caches full of the previous range's
bytes (ADR 0013); the decisions and the accounting are the scheduler's own, unchanged.
Any other case, and any scheduler that declines the fast path, goes through ``admit``.

Reading a request (once) lives in ``_request_headers.py``, observing a response in
``_observer.py``. A browser's navigation to a download that must wait gets the waiting
page instead of the problem document (ADR 0035): the middleware only decides that a
request is one (``_browser.py``, read for session-sized downloads without an id) and
keys its session by the browser's place; the page is ``_waiting_page.py``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import anyio

from .._classes import DownloadClass
from .._exceptions import InvalidRequestError
from .._model import Admitted, Decision, DownloadRequest, Queued
from .._port import DownloadScheduler, FastGrant, FastPath
from .._target import Resolver
from .._ticking import run_tick_loop
from ..policy import AT_THE_DOOR_RECHECK_SECONDS, NEWCOMER_CHECK_SECONDS
from ._asgi import ASGIApp, Message, Receive, Scope, Send
from ._browser import PlaceIds, Visit, read_visit
from ._observer import GrantObserver, PlaceObserver, failure_outcome
from ._problems import Answer, bad_request, busy, queued
from ._request_headers import read_request
from ._waiting_page import render_waiting_page, waiting_page_asset

__all__ = ["DownloadSchedulerMiddleware"]

_HEADER_FIELDS = {
    "download_class": "Arkvory-Download-Class",
    "download_id": "Arkvory-Download-Id",
    "ticket": "Arkvory-Queue-Ticket",
}
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
    middleware runs the scheduler for the lifetime of the ASGI lifespan: it starts it,
    runs its tick loop, closes it on shutdown and disconnects it before shutdown is
    complete (the port's lifecycle, the same for every store); pass ``False`` when the
    host runs them itself (``async with scheduler:`` and ``run_tick_loop``). With
    ``waiting_page`` (default) a browser's navigation to a download that waits gets the
    waiting page, whose stylesheet and script the middleware serves below its root path
    at ``/.arkvory/`` (ADR 0035); ``False`` answers every client alike.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        scheduler: DownloadScheduler,
        resolver: Resolver,
        run_ticks: bool = True,
        waiting_page: bool = True,
    ) -> None:
        self.app = app
        self.scheduler = scheduler
        self.resolver = resolver
        self.run_ticks = run_ticks
        self.waiting_page = waiting_page
        self._places = PlaceIds()
        self._held = 0

    @property
    def scheduler(self) -> DownloadScheduler:
        return self._scheduler

    @scheduler.setter
    def scheduler(self, scheduler: DownloadScheduler) -> None:
        self._scheduler = scheduler
        # Asked once per scheduler, never per request (module docstring).
        self._fast: FastPath[Any] | None = scheduler.fast_path()

    @property
    def held(self) -> int:
        """Requests being held right now: without a download id (R-HOLD-1), or with
        one at the door (R-HOLD-2)."""
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
            asset = waiting_page_asset(scope) if self.waiting_page else None
            if asset is not None:
                await _answer(send, asset)  # the waiting page's own stylesheet or script
                return
            await self.app(scope, receive, send)  # not a download, or denied
            return
        try:
            read = read_request(scope, target)
        except InvalidRequestError as error:
            await _answer(send, _invalid(error))
            return
        if read is None:
            await self.app(scope, receive, send)  # the app answers 304 or 416: no place
            return
        byte_range, download_id, requested, ticket, address = read
        visit: Visit | None = None
        more: tuple[tuple[bytes, bytes], ...] = ()
        if (
            download_id is None
            and self.waiting_page
            and target.size > self._scheduler.settings.session_min_bytes
        ):
            visit = read_visit(scope, address, self._places)
            if visit is not None and visit.identity is not None:
                # The browser's place keys its session, wherever it comes from.
                address = visit.identity
                ticket = ticket or visit.ticket
                # Once served, the cookie keeps the place id (a resumption finds its
                # session) but no ticket: a later download queues anew (ADR 0035).
                cookie = visit.cookie(None)
                more = (cookie,) if cookie is not None else ()
        fast = self._fast
        place: FastGrant | None = None
        decision: Decision | None = None
        try:
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
                if isinstance(decision, Queued) and (download_id is None or decision.at_the_door):
                    decision = await self._hold(request, decision)
        except InvalidRequestError as error:
            await _answer(send, _invalid(error))
            return
        # Every response is served inline rather than in a helper coroutine: a response of
        # a large object suspends at every chunk (file reads, flow control), and each
        # resumption passes through every coroutine frame between the task and the app.
        if place is not None and fast is not None:
            # The fast path's response. Its release is synchronous, so a cancelled request
            # cannot skip it and nothing needs a shield.
            observer = PlaceObserver(fast, place, send, more)
            try:
                await self.app(scope, receive, observer.send)
            except BaseException as error:
                if place.per_request:
                    fast.release_per_request(place, observer.sent)
                else:
                    fast.report_range(place, failure_outcome(observer, error))
                raise
            if place.per_request:
                # A per-request place counts only bytes (see counted()).
                fast.release_per_request(place, observer.counted(target.size, byte_range))
            else:
                fast.report_range(place, observer.outcome(target.size, place.byte_range))
        elif isinstance(decision, Admitted):
            grant_observer = GrantObserver(self._scheduler, decision, send, more)
            try:
                await self.app(scope, receive, grant_observer.send)
            except BaseException as error:
                # Shielded: a cancelled request must still give its place back (R-RES-3).
                with anyio.CancelScope(shield=True):
                    await self._scheduler.report(
                        decision.grant, failure_outcome(grant_observer, error)
                    )
                raise
            # The common path needs no shield (a cancel scope costs more than the report).
            outcome = grant_observer.outcome(target.size, decision.grant.byte_range)
            await self._scheduler.report(decision.grant, outcome)
        elif isinstance(decision, Queued):
            if visit is not None and visit.navigation:
                await _answer(send, render_waiting_page(decision, visit, scope))
            else:
                await _answer(send, queued(decision))
        elif decision is not None:
            await _answer(send, busy(decision))

    # ------------------------------------------------------------------ holding
    async def _hold(self, request: DownloadRequest, decision: Queued) -> Decision:
        """Hold a request for up to ``hold_seconds`` before answering 503.

        Third-party tools only see status and ``Retry-After``; many give up or back off
        badly, so the server waits for them as the old queue did (R-HOLD-1). A client
        that sends a download id is held only while it is at the door (R-HOLD-2: next
        round, its slot may free within the hold), so it takes a freed slot at once
        instead of up to a whole ``Retry-After`` second later. Each pass asks the
        scheduler again, which re-checks strategy and threshold (R-STRAT-4); a request
        at the door, with an id or without, asks at least every
        :data:`AT_THE_DOOR_RECHECK_SECONDS` (a shared store answers it from the
        process's snapshot, ADR 0029, until it is marked) and is woken by a slot freed
        in any process of a shared store (ADR 0037).

        A client with an id that has no ticket yet (a newcomer) is held at the door at
        most :data:`NEWCOMER_CHECK_SECONDS`, the time its first answer is due by
        (R-EST-3): a person's ``arkvoryctl`` learns its place then, and is not left
        silent for the whole hold behind a holder that paused.

        The answer at the end of a hold is still the request's first: where the store
        told a newcomer no place (PostgreSQL: sessions arriving at once on several
        processes commit out of order, ADR 0017 point 5), the place its re-asks read
        in the meantime is left out too, or the client's next poll could show it grow.
        """
        settings = self._scheduler.settings
        if self._held >= settings.transfer_queue_limit or settings.hold_seconds <= 0:
            return decision
        always = request.download_id is None
        hold = settings.hold_seconds
        if not always and request.ticket is None:
            hold = min(hold, NEWCOMER_CHECK_SECONDS)
        self._held += 1
        try:
            deadline = anyio.current_time() + hold
            current: Decision = decision
            while isinstance(current, Queued) and (always or current.at_the_door):
                remaining = deadline - anyio.current_time()
                if remaining <= 0:
                    break
                wait = min(remaining, float(current.retry_after))
                if current.at_the_door:
                    wait = min(wait, AT_THE_DOOR_RECHECK_SECONDS)
                    await self._scheduler.wait_at_the_door(wait)
                else:
                    await self._scheduler.wait_for_change(wait)
                current = await self._scheduler.admit(request)
            if isinstance(current, Queued) and decision.position is None:
                return replace(current, position=None)
            return current
        finally:
            self._held -= 1

    # ------------------------------------------------------------------ lifespan
    async def _lifespan(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Start the scheduler and run its tick loop while the application lives;
        drain on shutdown (R-RES-4) and disconnect before shutdown is complete.

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
                    await self._scheduler.start()
                    tasks.start_soon(run_tick_loop, self._scheduler)
                elif message["type"] == "lifespan.shutdown":
                    state["shutdown"] = True
                    await self._scheduler.close()
                return message

            async def observed_send(message: Message) -> None:
                state["answered"] = True
                if message["type"] == "lifespan.shutdown.complete":
                    await self._scheduler.disconnect()
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
                    await self._scheduler.disconnect()
                    await send({"type": "lifespan.shutdown.complete"})
            finally:
                tasks.cancel_scope.cancel()
        if failure is not None:
            raise failure


def _invalid(error: InvalidRequestError) -> Answer:
    """The ``400`` naming the header a client got wrong, never echoing its value."""
    field = _HEADER_FIELDS.get(error.field, error.field)
    detail = _INVALID_DETAIL.get(error.field) or error.message.replace(error.field, field)
    return bad_request(field, detail)


async def _answer(send: Send, answer: Answer) -> None:
    status, headers, body = answer
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
