"""Sixteen operators changing the settings at once over HTTP lose nothing (R-SET-5).

Each writer reads the record, changes its own service account's class and puts the
record back with the revision it read; on ``409`` it reads again and retries. The
compare-and-set must let exactly one of the racing writes through per revision, so:
revisions rise by exactly one per applied change (final = writers × updates), every
writer's every change is applied once, no applied change undoes another's (each
audit entry starts from what the previous one left), and every refused attempt the
clients saw is in the audit trail.

The server is the demo (``arkvory-demo serve``) in a process of its own, on each store.
The writers are threads with the standard library's keep-alive ``HTTPConnection``: a
lean client, so the run measures the server and the store rather than the client
(with httpx the client's own work took three quarters of the time).
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections import Counter
from typing import Any
from urllib.parse import urlsplit

import httpx

from arkvory_sched.api import MAX_HISTORY_LIMIT

from .conftest import VIEWER_TOKEN, WRITER_TOKEN_PREFIX, StartDemo, headers

WRITERS = 16
UPDATES = 100
CLASSES = ("release", "bulk", "background", "interactive")


def value_of(writer: int, update: int) -> str:
    return CLASSES[(writer + update) % len(CLASSES)]


class Writer(threading.Thread):
    """``UPDATES`` changes by one operator; counts its refused attempts."""

    def __init__(self, api_url: str, number: int) -> None:
        super().__init__(name=f"writer-{number}", daemon=True)
        self.url = urlsplit(api_url)
        self.number = number
        self.token = f"{WRITER_TOKEN_PREFIX}{number}"
        self.refused = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._write()
        except BaseException as error:
            self.error = error

    def _write(self) -> None:
        assert self.url.hostname is not None
        connection = http.client.HTTPConnection(self.url.hostname, self.url.port, timeout=30)
        path = f"{self.url.path}/settings"
        sent = headers(self.token)
        for update in range(UPDATES):
            while True:
                connection.request("GET", path, headers=sent)
                answer = connection.getresponse()
                document = json.loads(answer.read())
                assert answer.status == 200, document
                record: dict[str, Any] = document["record"]
                accounts = dict(record.get("serviceAccountClasses", {}))
                accounts[self.token] = value_of(self.number, update)
                body = {**record, "serviceAccountClasses": accounts}
                body["expectedRevision"] = document["revision"]
                connection.request("PUT", path, body=json.dumps(body), headers=sent)
                answer = connection.getresponse()
                reply = json.loads(answer.read())
                if answer.status == 200:
                    break
                assert answer.status == 409, reply
                assert reply["currentRevision"] > document["revision"]
                self.refused += 1
        connection.close()


def whole_history(api_url: str, client: httpx.Client) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    url: str | None = f"{api_url}/settings/history?limit={MAX_HISTORY_LIMIT}"
    while url is not None:
        page = client.get(url, headers={"authorization": f"Bearer {VIEWER_TOKEN}"}).json()
        entries += page["entries"]
        url = page["next"]
    return entries


def test_sixteen_writers_times_a_hundred_lose_no_update(
    start_demo: StartDemo, client: httpx.Client
) -> None:
    api_url = start_demo(writers=WRITERS).api_url
    writers = [Writer(api_url, number) for number in range(WRITERS)]
    started = time.perf_counter()
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(300.0)
        assert not writer.is_alive(), f"{writer.name} did not finish"
        if writer.error is not None:
            raise writer.error
    elapsed = time.perf_counter() - started
    refused = sum(writer.refused for writer in writers)

    final = client.get(
        f"{api_url}/settings", headers={"authorization": f"Bearer {VIEWER_TOKEN}"}
    ).json()
    assert final["revision"] == WRITERS * UPDATES
    last = {f"{WRITER_TOKEN_PREFIX}{n}": value_of(n, UPDATES - 1) for n in range(WRITERS)}
    assert final["record"]["serviceAccountClasses"] == last
    assert final["appliedRevision"] == WRITERS * UPDATES

    history = whole_history(api_url, client)
    applied = sorted(
        (entry for entry in history if entry["outcome"] == "applied"),
        key=lambda entry: entry["revision"],
    )
    mismatches = [entry for entry in history if entry["outcome"] == "revision_mismatch"]
    assert [entry["revision"] for entry in applied] == list(range(1, WRITERS * UPDATES + 1))
    assert Counter(entry["actor"] for entry in applied) == Counter(
        {f"{WRITER_TOKEN_PREFIX}{n}": UPDATES for n in range(WRITERS)}
    )
    assert Counter(entry["actor"] for entry in mismatches) == Counter(
        {writer.token: writer.refused for writer in writers if writer.refused}
    )
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
        f"\n{WRITERS}x{UPDATES} compare-and-set over HTTP ({start_demo.store}): "
        f"{elapsed:.1f} s, final revision {final['revision']}, {refused} refusals audited"
    )
