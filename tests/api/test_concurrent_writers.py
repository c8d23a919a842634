"""Sixteen operators changing the settings at once over HTTP lose nothing (R-SET-5).

Each writer reads the record, changes its own service account's class and puts the
record back with the revision it read; on ``409`` it reads again and retries. The
compare-and-set must let exactly one of the racing writes through per revision, so:
revisions rise by exactly one per applied change (final = writers × updates), every
writer's every change is applied once, no applied change undoes another's (each
audit entry starts from what the previous one left), and every refused attempt the
clients saw is in the audit trail.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import httpx

from arkvory_sched.api import MAX_HISTORY_LIMIT

from .conftest import VIEWER_TOKEN, WRITER_TOKEN_PREFIX, ApiServer, headers

WRITERS = 16
UPDATES = 100
CLASSES = ("release", "bulk", "background", "interactive")


def value_of(writer: int, update: int) -> str:
    return CLASSES[(writer + update) % len(CLASSES)]


async def write(client: httpx.AsyncClient, api_server: ApiServer, writer: int) -> int:
    """``UPDATES`` changes by one writer; returns how many of its attempts were refused."""
    token = f"{WRITER_TOKEN_PREFIX}{writer}"
    sent = headers(token)
    refused = 0
    for update in range(UPDATES):
        while True:
            current = await client.get(api_server.url("/settings"), headers=sent)
            assert current.status_code == 200, current.text
            document = current.json()
            record: dict[str, Any] = document["record"]
            accounts = dict(record.get("serviceAccountClasses", {}))
            accounts[token] = value_of(writer, update)
            body = {**record, "serviceAccountClasses": accounts}
            body["expectedRevision"] = document["revision"]
            answer = await client.put(api_server.url("/settings"), json=body, headers=sent)
            if answer.status_code == 200:
                break
            assert answer.status_code == 409, answer.text
            assert answer.json()["currentRevision"] > document["revision"]
            refused += 1
    return refused


async def race(api_server: ApiServer) -> int:
    limits = httpx.Limits(max_connections=WRITERS)
    async with httpx.AsyncClient(timeout=30.0, limits=limits) as client:
        refusals = await asyncio.gather(*(write(client, api_server, n) for n in range(WRITERS)))
    return sum(refusals)


def whole_history(api_server: ApiServer, client: httpx.Client) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    url: str | None = api_server.url(f"/settings/history?limit={MAX_HISTORY_LIMIT}")
    while url is not None:
        page = client.get(url, headers={"authorization": f"Bearer {VIEWER_TOKEN}"}).json()
        entries += page["entries"]
        url = page["next"]
    return entries


def test_sixteen_writers_times_a_hundred_lose_no_update(
    api_server: ApiServer, client: httpx.Client
) -> None:
    started = time.perf_counter()
    refused = asyncio.run(race(api_server))
    elapsed = time.perf_counter() - started

    final = client.get(
        api_server.url("/settings"), headers={"authorization": f"Bearer {VIEWER_TOKEN}"}
    ).json()
    assert final["revision"] == WRITERS * UPDATES
    last = {f"{WRITER_TOKEN_PREFIX}{n}": value_of(n, UPDATES - 1) for n in range(WRITERS)}
    assert final["record"]["serviceAccountClasses"] == last
    assert final["appliedRevision"] == WRITERS * UPDATES

    history = whole_history(api_server, client)
    applied = sorted(
        (entry for entry in history if entry["outcome"] == "applied"),
        key=lambda entry: entry["revision"],
    )
    mismatches = [entry for entry in history if entry["outcome"] == "revision_mismatch"]
    assert [entry["revision"] for entry in applied] == list(range(1, WRITERS * UPDATES + 1))
    assert Counter(entry["actor"] for entry in applied) == Counter(
        {f"{WRITER_TOKEN_PREFIX}{n}": UPDATES for n in range(WRITERS)}
    )
    assert len(mismatches) == refused
    assert len(history) == WRITERS * UPDATES + refused
    # No applied change undid another: each starts from what the one before left.
    previous: dict[str, str] = {}
    for entry in applied:
        change = entry["change"]["serviceAccountClasses"]
        assert (change["from"] or {}) == previous, entry
        moved = {k for k in set(previous) | set(change["to"]) if previous.get(k) != change["to"][k]}
        assert moved == {entry["actor"]}, entry
        previous = change["to"]
    print(
        f"\n{WRITERS}x{UPDATES} compare-and-set over HTTP: {elapsed:.1f} s, "
        f"final revision {final['revision']}, {refused} refusals audited"
    )
