"""One client process of the gate's crowd: many downloads through the real async SDK.

Each download starts at its arrival (seconds after a common wall-clock origin), uses the
SDK exactly as a CI agent would (``AsyncClient.download``, its default retry policy: 5
failed attempts per request, 20 per download; busy answers with ``Retry-After`` do not
count), and records what the SDK's events told it: the first announced start that came
with a place (as the simulation scores it) and its interval, every announced position,
the first byte, the completion, the failures, and whether it finished, gave up (retries
exhausted) or failed otherwise. Nothing here decides anything: the SDK's events are the
measurement. Files go to a tmpfs directory and are deleted as soon as they are complete,
so the disk is never the bottleneck.

Run: ``python -m benchmarks._gate_crowd SPEC OUT.json`` where the JSON spec holds
``url``, ``token``, ``origin`` (epoch seconds), ``arrivals``, ``directory`` and
``range_size`` (the SDK's ``chunk_size``: the bytes each request asks for), and may hold
``limit_rate``: the bytes per second each response is read at, at most (a site behind a
thin line, issue #30), as ``curl --limit-rate`` paces its reads.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx

from arkvory_client import (
    AsyncClient,
    Completed,
    Event,
    Queued,
    RetriesExhaustedError,
    Retrying,
    Started,
)


async def _one(client: AsyncClient, spec: dict[str, Any], index: int) -> dict[str, Any]:
    keys = ("arrival", "estimate", "earliest", "latest", "start", "end", "stop", "error")
    record: dict[str, Any] = dict.fromkeys(keys)
    record |= {"positions": [], "failures": 0, "queued": 0, "outcome": "failed"}

    def on_event(event: Event) -> None:
        now = time.time()
        if isinstance(event, Queued):
            record["queued"] += 1
            if event.position is None:  # a newcomer's placeholder answer (R-EST-3)
                return
            record["positions"].append((now, event.position))
            if event.starts_at is None:
                return
            if record["earliest"] is None:  # the first answer's interval is judged
                record["earliest"] = (event.earliest or event.starts_at).timestamp()
                record["latest"] = (event.latest or event.starts_at).timestamp()
            if record["estimate"] is None and not event.guessed:  # ADR 0042
                record["estimate"] = event.starts_at.timestamp()
        elif isinstance(event, Started) and record["start"] is None:
            record["start"] = now
        elif isinstance(event, Retrying):
            record["failures"] += 1
        elif isinstance(event, Completed):
            record["end"] = now

    await asyncio.sleep(max(0.0, spec["origin"] + spec["arrivals"][index] - time.time()))
    record["arrival"] = time.time()
    dest = Path(spec["directory"]) / f"{index}.bin"
    try:
        await client.download(spec["url"], dest, on_event=on_event)
        record["outcome"] = "finished"
    except RetriesExhaustedError as error:
        record["outcome"], record["error"] = "gave_up", str(error)
    except Exception as error:  # counted and reported, never hidden
        record["error"] = f"{type(error).__name__}: {error}"
    record["stop"] = time.time()
    dest.unlink(missing_ok=True)
    return record


class _Paced(httpx.AsyncByteStream):
    """A response body read no faster than ``rate`` bytes per second: the reader sleeps
    until each chunk is due, so the server's send buffer fills and TCP slows the sender,
    as behind a thin line."""

    def __init__(self, stream: httpx.AsyncByteStream, rate: float) -> None:
        self._stream, self._rate = stream, rate

    async def __aiter__(self) -> AsyncIterator[bytes]:
        began, read = time.monotonic(), 0
        async for chunk in self._stream:
            read += len(chunk)
            await asyncio.sleep(max(0.0, began + read / self._rate - time.monotonic()))
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()


class _PacedTransport(httpx.AsyncBaseTransport):
    def __init__(self, rate: float) -> None:
        self._inner, self._rate = httpx.AsyncHTTPTransport(), rate

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        assert isinstance(response.stream, httpx.AsyncByteStream)
        response.stream = _Paced(response.stream, self._rate)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


async def _main(spec: dict[str, Any], out: str) -> None:
    Path(spec["directory"]).mkdir(parents=True, exist_ok=True)
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    headers = {"Authorization": f"Bearer {spec['token']}"}
    paced = spec.get("limit_rate")
    transport = None if paced is None else _PacedTransport(float(paced))
    async with (
        httpx.AsyncClient(
            headers=headers, limits=limits, timeout=60.0, transport=transport
        ) as http,
        AsyncClient(http=http, chunk_size=spec["range_size"]) as client,
    ):
        records = await asyncio.gather(
            *(_one(client, spec, index) for index in range(len(spec["arrivals"])))
        )
    shutil.rmtree(spec["directory"], ignore_errors=True)
    with open(out, "w", encoding="utf-8") as file:
        json.dump(records, file)


if __name__ == "__main__":
    asyncio.run(_main(json.loads(sys.argv[1]), sys.argv[2]))
