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
``range_size`` (the SDK's ``chunk_size``: the bytes each request asks for).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import time
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
            if record["estimate"] is None and event.starts_at is not None:
                record["estimate"] = event.starts_at.timestamp()
                record["earliest"] = (event.earliest or event.starts_at).timestamp()
                record["latest"] = (event.latest or event.starts_at).timestamp()
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


async def _main(spec: dict[str, Any], out: str) -> None:
    Path(spec["directory"]).mkdir(parents=True, exist_ok=True)
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    headers = {"Authorization": f"Bearer {spec['token']}"}
    async with (
        httpx.AsyncClient(headers=headers, limits=limits, timeout=60.0) as http,
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
