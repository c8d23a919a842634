"""A loopback HTTP proxy that writes down every request a tool makes, and its answer.

The recipes' tests need to see a tool from the server's side: when it asked, what it
was told (status and ``Retry-After``), and how long it waited before asking again. The
demo server's own log has no times, and the tools' logs differ from tool to tool, so the
tool talks to this proxy, which forwards every byte to the demo server and notes the
request line, the time its head arrived, the status of the answer and its
``Retry-After``.

It asks the server to close each connection after its answer (``Connection: close``):
then one connection carries one exchange, and the proxy needs to read only heads, never
a body's framing. A tool that would have kept its connection for the next request
opens a new one instead: a TCP handshake on loopback, far below what the tests measure.
"""

from __future__ import annotations

import contextlib
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

__all__ = ["Exchange", "RecordingProxy"]

HOST: Final = "127.0.0.1"
_HEAD_END: Final = b"\r\n\r\n"
_MAX_HEAD: Final = 64 * 1024
_CHUNK: Final = 64 * 1024
_HOP_HEADERS: Final = re.compile(rb"^(connection|keep-alive|proxy-connection):", re.IGNORECASE)


@dataclass
class Exchange:
    """One request as the proxy saw it; the answer's fields stay ``None`` until it comes."""

    method: str
    target: str
    asked: float  # time.monotonic() when the request's head had arrived
    status: int | None = None
    retry_after: int | None = None
    answered: float | None = None  # time.monotonic() when the answer's head had arrived


class RecordingProxy:
    """Forwards loopback connections to ``upstream_port`` and records each exchange.

    Use as a context manager; :attr:`port` is where the tools connect.
    """

    def __init__(self, upstream_port: int) -> None:
        self._upstream = (HOST, upstream_port)
        self._listener = socket.create_server((HOST, 0))
        self.port: int = self._listener.getsockname()[1]
        self._changed = threading.Condition()
        self._exchanges: list[Exchange] = []
        self._closed = False
        self._thread = threading.Thread(target=self._accept, name="recording-proxy", daemon=True)

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self._thread.join(5.0)

    def url(self, path: str) -> str:
        return f"http://{HOST}:{self.port}{path}"

    # ------------------------------------------------------------------ observations
    def exchanges(self, path: str | None = None) -> list[Exchange]:
        """The exchanges so far (of ``path`` only, when given), in arrival order."""
        with self._changed:
            return [e for e in self._exchanges if path is None or e.target == path]

    def wait_for(self, predicate: Callable[[list[Exchange]], bool], timeout: float) -> bool:
        """Block until ``predicate`` holds for the exchanges; ``False`` after ``timeout``."""
        with self._changed:
            return self._changed.wait_for(lambda: predicate(self._exchanges), timeout)

    # ------------------------------------------------------------------ forwarding
    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        with client:
            head = _read_head(client)
            if head is None:
                return
            request_line, *fields = head.split(b"\r\n")
            method, target, _version = request_line.decode("latin-1").split(" ", 2)
            exchange = Exchange(method, target, time.monotonic())
            self._record(exchange)
            kept = [f for f in fields if f and not _HOP_HEADERS.match(f)]
            forwarded = b"\r\n".join([request_line, *kept, b"Connection: close"]) + _HEAD_END
            try:
                upstream = socket.create_connection(self._upstream)
            except OSError:
                return  # the server is gone: the tool sees its connection closed
            with upstream:
                try:
                    upstream.sendall(forwarded)
                except OSError:
                    return
                watcher = threading.Thread(
                    target=_close_when_gone, args=(client, upstream), daemon=True
                )
                watcher.start()
                self._relay_answer(upstream, client, exchange)

    def _relay_answer(
        self, upstream: socket.socket, client: socket.socket, exchange: Exchange
    ) -> None:
        answer = b""
        while _HEAD_END not in answer:
            data = _recv(upstream)
            if not data:
                return
            answer += data
            if len(answer) > _MAX_HEAD:
                break
        status_line, _, rest = answer.partition(b"\r\n")
        parts = status_line.split(b" ")
        with self._changed:
            exchange.status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
            found = re.search(rb"(?im)^retry-after:\s*(\d+)\s*$", rest.partition(_HEAD_END)[0])
            exchange.retry_after = int(found.group(1)) if found else None
            exchange.answered = time.monotonic()
            self._changed.notify_all()
        try:
            client.sendall(answer)
            while data := _recv(upstream):
                client.sendall(data)
        except OSError:
            return

    def _record(self, exchange: Exchange) -> None:
        with self._changed:
            self._exchanges.append(exchange)
            self._changed.notify_all()


def _recv(sock: socket.socket) -> bytes:
    try:
        return sock.recv(_CHUNK)
    except OSError:
        return b""


def _read_head(client: socket.socket) -> bytes | None:
    """The request's head without its final blank line, or ``None`` if the tool left."""
    data = b""
    while _HEAD_END not in data:
        chunk = _recv(client)
        if not chunk or len(data) > _MAX_HEAD:
            return None
        data += chunk
    head, _, _body = data.partition(_HEAD_END)  # a GET has no body
    return head


def _close_when_gone(client: socket.socket, upstream: socket.socket) -> None:
    """A tool that gives up mid-request closes its side: pass that on to the server."""
    while _recv(client):
        pass
    with contextlib.suppress(OSError):
        upstream.shutdown(socket.SHUT_RDWR)
