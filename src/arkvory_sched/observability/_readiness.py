"""The readiness endpoint: aggregates only, never an id (R-VIS-4).

A load balancer or an operator asks whether this process is serving downloads and how
loaded it is. The answer is built from :meth:`DownloadScheduler.stats`, which carries
counts per class and nothing that names a principal, an object or a session, so the
document cannot leak who is downloading what. A closing scheduler answers ``503`` so
the balancer stops sending new downloads while active ones drain (R-RES-4).

The two small helpers at the bottom serve both read-only endpoints (this one and
``/metrics``): a complete response in two ASGI messages, and polite handling of the
scopes an endpoint mounted on its own may see (``lifespan``, ``websocket``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence

from starlette.types import ASGIApp, Receive, Scope, Send

from .._classes import DownloadClass
from .._model import SchedulerStats
from .._port import DownloadScheduler

__all__ = ["queue_empty_in", "readiness_app", "readiness_document"]

READ_METHODS = frozenset({"GET", "HEAD"})
JSON_CONTENT_TYPE = "application/json"


def readiness_document(stats: SchedulerStats, held: int) -> dict[str, object]:
    """The readiness answer for one stats snapshot, as JSON-ready values.

    ``held`` is the number of third-party requests the middleware holds before they
    queue (R-HOLD-1); the scheduler does not see them, so the caller passes it in.
    A class's ``oldestWaitSeconds`` is ``None`` while none of its sessions waits: there
    is no oldest waiter, and a ``0`` would read as one that just arrived.
    ``queueEmptyInSeconds`` is ``0`` when nothing waits and ``None`` when it cannot be
    said (see :func:`queue_empty_in`). Every value is a count, a duration, a rate or a
    setting: the function has no ids to give away.
    """
    classes: dict[str, object] = {}
    for cls, class_stats in sorted(stats.per_class.items(), key=_by_rank):
        classes[cls.value] = {
            "waiting": class_stats.waiting,
            "active": class_stats.active,
            "paused": class_stats.paused,
            "oldestWaitSeconds": _finite(class_stats.oldest_wait_seconds)
            if class_stats.waiting
            else None,
        }
    return {
        "status": "closing" if stats.closed else "ok",
        "strategy": stats.strategy,
        "admission": stats.admission,
        "sessions": stats.sessions_limit,
        "classes": classes,
        "waiting": stats.waiting,
        "active": stats.active,
        "requests": {"active": stats.request_active, "waiting": stats.request_waiting},
        "held": held,
        "lastTickSeconds": _finite(stats.last_tick_seconds),
        "deliveryRateBytesPerSecond": _finite(stats.delivery_rate),
        "queueEmptyInSeconds": queue_empty_in(stats),
    }


def queue_empty_in(stats: SchedulerStats) -> float | None:
    """Seconds until the queue is empty: ``0.0`` when nothing waits, ``None`` when a
    store cannot say (no delivery rate measured or configured yet).

    The stores leave the forecast out when nothing waits; readiness and ``/metrics``
    both report that as the empty queue it is, so an alert or a dashboard can tell an
    empty queue from an unknown forecast.
    """
    if stats.waiting == 0:
        return 0.0
    return _finite(stats.queue_empty_in_seconds)


def readiness_app(
    scheduler: DownloadScheduler, *, held: Callable[[], int] | None = None
) -> ASGIApp:
    """A pure ASGI app answering ``GET``/``HEAD`` with :func:`readiness_document`.

    ``200`` while the scheduler serves, ``503`` once it is closing (the body is the same
    document with ``"status": "closing"``); other methods get ``405``. Stats are read on
    every request, so the answer is never older than the probe. ``held`` reports the
    middleware's held requests (0 without it).
    """
    count_held = held or _nobody_held

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await serve_non_http(scope, receive, send)
            return
        method = scope["method"]
        if method not in READ_METHODS:
            await send_method_not_allowed(send, method)
            return
        stats = await scheduler.stats()
        document = readiness_document(stats, count_held())
        body = json.dumps(document, allow_nan=False, separators=(",", ":")).encode()
        await send_response(
            send,
            503 if stats.closed else 200,
            body,
            JSON_CONTENT_TYPE,
            head=method == "HEAD",
        )

    return app


def _nobody_held() -> int:
    return 0


def _by_rank(item: tuple[DownloadClass, object]) -> int:
    return item[0].rank


def _finite(value: float | None) -> float | None:
    """JSON has no NaN or infinity: a value that is not a number is reported as unknown."""
    if value is None or not math.isfinite(value):
        return None
    return value


# --- ASGI plumbing shared by the read-only endpoints -------------------------------------


async def send_response(
    send: Send,
    status: int,
    body: bytes,
    content_type: str,
    *,
    head: bool = False,
    extra_headers: Sequence[tuple[bytes, bytes]] = (),
) -> None:
    """Send one complete, uncacheable response; ``HEAD`` gets the headers of ``GET``."""
    headers = [
        (b"content-type", content_type.encode("latin-1")),
        (b"content-length", str(len(body)).encode("latin-1")),
        (b"cache-control", b"no-store"),
        *extra_headers,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if head else body})


async def send_method_not_allowed(send: Send, method: str) -> None:
    """``405`` naming the methods the endpoint answers."""
    await send_response(
        send,
        405,
        f"method {method} not allowed; use GET or HEAD\n".encode("latin-1", "replace"),
        "text/plain; charset=utf-8",
        extra_headers=[(b"allow", b"GET, HEAD")],
    )


async def serve_non_http(scope: Scope, receive: Receive, send: Send) -> None:
    """Answer the scopes an endpoint served on its own may receive besides ``http``.

    ``lifespan`` is acknowledged (there is nothing to start or stop); a ``websocket``
    is closed before it is accepted, which the server turns into ``403``.
    """
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    elif scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008})
