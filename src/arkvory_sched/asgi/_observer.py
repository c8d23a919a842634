"""Observing one admitted response: its added headers, its bytes, how it ended.

The middleware wraps the application's ``send`` in one of these per admitted response.
It passes every message through untouched except for the headers it adds to
``http.response.start``, never keeps a body chunk, reports progress on long responses,
and at the end tells which outcome the scheduler gets: ``Delivered`` only when the body
went out in full with a 200/206 status.
"""

from __future__ import annotations

from time import monotonic
from typing import Any

import anyio

from .._classes import DownloadClass
from .._model import Admitted, ByteRange, Delivered, DeliveryOutcome, Failed, Grant, Interrupted
from .._port import DownloadScheduler, FastGrant, FastPath
from ._asgi import Message, Send

__all__ = [
    "CLASS_HEADERS",
    "PROGRESS_EVERY_BYTES",
    "PROGRESS_EVERY_SECONDS",
    "GrantObserver",
    "PlaceObserver",
    "ResponseObserver",
    "failure_outcome",
]

# A long response reports its bytes as it goes, so that the delivery rate, the byte
# counters and the estimates of whoever waits for its slot see it move (issue #28: a
# curl download of 24 MiB at 3 MB/s reported nothing for 8 s); a response ends with its
# outcome, which counts the rest. At most once a second, looked at once per MiB: the
# clock is read once per MiB sent, and the first MiB only starts the clock, so a range
# that ends within a second (an SDK range on a fast link) reports only its outcome.
# Each report costs tens of microseconds on a loaded server (benchmarks/RESULTS.md).
PROGRESS_EVERY_BYTES = 1024 * 1024
PROGRESS_EVERY_SECONDS = 1.0
# The header each admitted response gets, built once per class rather than per response.
CLASS_HEADERS: dict[DownloadClass, tuple[tuple[bytes, bytes], ...]] = {
    cls: ((b"arkvory-download-class", cls.value.encode("latin-1")),) for cls in DownloadClass
}


class ResponseObserver:
    """Wraps ``send`` for one admitted response: adds headers, counts bytes, reports
    progress, and knows at the end whether the response was delivered in full.

    ``finished`` is whether the body's last message (``more_body`` false) went out.
    """

    __slots__ = ("_extra", "_progress_at", "_reported", "_reported_at", "_send", "disconnected",
                 "finished", "sent", "status")  # fmt: skip

    def __init__(self, send: Send, extra: tuple[tuple[bytes, bytes], ...]) -> None:
        self._send = send
        self._extra = extra
        self._progress_at = PROGRESS_EVERY_BYTES
        self._reported = 0
        self._reported_at = 0.0
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
                # Everything since the last report, once a second has passed. The body's
                # last message needs none: the outcome, reported next, counts it.
                self._progress_at = sent + PROGRESS_EVERY_BYTES
                now = monotonic()
                if not self._reported_at:
                    self._reported_at = now
                elif now - self._reported_at >= PROGRESS_EVERY_SECONDS:
                    self._reported_at = now
                    reported, self._reported = self._reported, sent
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


class GrantObserver(ResponseObserver):
    """The observer of a response admitted through the port; ``more`` are headers the
    middleware adds besides the class and ticket (a browser's place cookie)."""

    __slots__ = ("_grant", "_scheduler")

    def __init__(
        self,
        scheduler: DownloadScheduler,
        decision: Admitted,
        send: Send,
        more: tuple[tuple[bytes, bytes], ...] = (),
    ) -> None:
        grant = decision.grant
        extra = CLASS_HEADERS[grant.download_class]
        if decision.ticket is not None:
            extra = (*extra, (b"arkvory-queue-ticket", decision.ticket.encode()))
        super().__init__(send, (*extra, *more) if more else extra)
        self._scheduler = scheduler
        self._grant: Grant = grant

    async def _progress(self, nbytes: int) -> None:
        await self._scheduler.progress(self._grant, nbytes)


class PlaceObserver(ResponseObserver):
    """The observer of a response on the scheduler's :class:`FastPath`: a per-request
    place, or a range of an active session (with the session's ticket); ``more`` as for
    :class:`GrantObserver`."""

    __slots__ = ("_fast", "_place")

    def __init__(
        self,
        fast: FastPath[Any],
        place: FastGrant,
        send: Send,
        more: tuple[tuple[bytes, bytes], ...] = (),
    ) -> None:
        # Every field set here rather than through super(): one call fewer per small object.
        self._send = send
        extra = CLASS_HEADERS[place.download_class]
        if place.ticket is not None:
            extra = (*extra, (b"arkvory-queue-ticket", place.ticket.encode()))
        self._extra = (*extra, *more) if more else extra
        self._progress_at = PROGRESS_EVERY_BYTES
        self._reported = 0
        self._reported_at = 0.0
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


def failure_outcome(observer: ResponseObserver, error: BaseException) -> DeliveryOutcome:
    """The outcome of a response that ended in ``error``: a failed send means the client
    is gone, whatever the app turned it into (Starlette raises ClientDisconnect under
    ASGI 2.4), as does a cancellation; anything else is the app's failure."""
    interrupted = observer.disconnected or isinstance(
        error, OSError | anyio.get_cancelled_exc_class()
    )
    return Interrupted(observer.sent) if interrupted else Failed(observer.sent)
