"""The queue protocol on the wire (SPEC §16) with raw httpx and ``Arkvory-Download-Id``.

A protocol client that must wait gets ``503`` ``download_queued`` with ``Retry-After``,
its position, the announced start and a queue ticket; the ticket brings it back to its
old place after a server restart (the key persists in the served directory), and an
edited ticket brings nothing. Class headers may only lower the class.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx

from arkvory_sched.sqlite import load_or_create_ticket_key

from .conftest import (
    MIB,
    ONE_SLOT,
    SETTLE_SECONDS,
    DemoServer,
    SlotHolder,
    StartServer,
    wait_until,
    write_pattern_file,
)

TICKET = re.compile(r"2\.([0-9a-z]+)\.([0-9a-z]+)\.[A-Za-z0-9_-]{43}")
# A cold server without a configured rate says its start is a guess (ADR 0042).
STARTS_AT = re.compile(r"(\S+Z); earliest=(\S+Z); latest=(\S+Z)(?:; basis=guess)?")
SETTINGS_FILE = ".arkvory-settings.sqlite3"  # keeps the ticket key
#: The protocol is read answer by answer while the slot's holder sits idle: a waiter next
#: in line would otherwise be held at the door (R-HOLD-2) for a slot the estimate says
#: frees soon. Holding has its own tests (unit, contract); here nothing is held.
ANSWERED_AT_ONCE = {**ONE_SLOT, "ARKVORY_DOWNLOAD_HOLD_SECONDS": "0"}


def _instant(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


def _arrival(ticket: str) -> int:
    match = TICKET.fullmatch(ticket)
    assert match is not None, ticket
    return int(match.group(1), 36)


@dataclass
class Client:
    """A protocol client: one download id, and the last ticket it was given."""

    server: DemoServer
    name: str
    download_id: str
    ticket: str | None = None
    due: float = 0.0
    """When its last place is up (monotonic): an earlier poll is told it again (ADR 0029)."""

    def get(
        self, headers: Mapping[str, str] | None = None, *, ticket: str | None = None
    ) -> httpx.Response:
        sent = {"Arkvory-Download-Id": self.download_id, **(headers or {})}
        presented = ticket if ticket is not None else self.ticket
        if presented is not None:
            sent["Arkvory-Queue-Ticket"] = presented
        response = httpx.get(self.server.url(self.name), headers=sent, timeout=30.0)
        issued = response.headers.get("arkvory-queue-ticket")
        if issued is not None:
            self.ticket = issued
        if presented is not None and "arkvory-queue-position" in response.headers:
            self.due = time.monotonic() + int(response.headers["retry-after"])
        return response

    def position(self) -> int:
        """Poll once when told to, as a protocol client does (a poll before then is told
        its last place again, ADR 0029); the download must still be waiting, at a known
        place. A newcomer's next poll (its first answer came without a ticket sent) is
        decided at once."""
        time.sleep(max(0.0, self.due - time.monotonic()))
        response = self.get()
        assert response.status_code == 503, response.text
        assert response.json()["reason"] == "download_queued"
        return int(response.headers["arkvory-queue-position"])


def test_a_waiting_download_is_told_where_it_stands(
    start_server: StartServer, demo_root: Path
) -> None:
    write_pattern_file(demo_root / "busy.bin", 2 * MIB)
    expected = write_pattern_file(demo_root / "wanted.bin", 3 * MIB)
    server = start_server(env=ANSWERED_AT_ONCE)
    holder = SlotHolder(server, "busy.bin", "holder")
    holder.take()
    waiter = Client(server, "wanted.bin", "waiter-1")

    before = time.time()
    first = waiter.get()
    after = time.time()
    assert first.status_code == 503
    assert first.headers["content-type"] == "application/problem+json"
    problem = first.json()
    assert problem["reason"] == "download_queued"
    assert problem["status"] == 503
    assert problem["type"] == "urn:arkvory:problem:download_queued"
    retry_after = int(first.headers["retry-after"])
    assert 1 <= retry_after <= 300
    # A newcomer's first answer has its place too (R-EST-3).
    assert first.headers["arkvory-queue-position"] == "1"
    assert problem["position"] == 1
    match = STARTS_AT.fullmatch(first.headers["arkvory-starts-at"])
    assert match is not None, first.headers["arkvory-starts-at"]
    starts, earliest, latest = (_instant(value) for value in match.groups())
    assert earliest <= starts <= latest
    assert before - 2 <= starts <= before + 3600
    assert problem["startsAt"] == match.group(1)
    assert problem["startsGuessed"] is first.headers["arkvory-starts-at"].endswith("basis=guess")
    ticket = first.headers["arkvory-queue-ticket"]
    assert TICKET.fullmatch(ticket)
    # The arrival is the server's wall clock during the request (milliseconds, rounded).
    assert before - 1 <= _arrival(ticket) / 1000 <= after + 1

    second = waiter.get()
    assert second.status_code == 503
    assert second.headers["arkvory-queue-position"] == "1"
    assert second.json()["position"] == 1
    assert "retry-after" in second.headers
    # Reissued with the same arrival time (R-TICKET-2).
    assert _arrival(second.headers["arkvory-queue-ticket"]) == _arrival(ticket)
    readiness = server.readiness()
    assert (readiness["active"], readiness["waiting"]) == (1, 1)

    holder.finish()  # the slot frees; the waiter gets it on its next poll
    served: list[httpx.Response] = []

    def admitted() -> bool:
        response = waiter.get()
        if response.status_code == 503:
            assert response.json()["reason"] == "download_queued"
            return False
        served.append(response)
        return True

    wait_until(admitted, SETTLE_SECONDS, "the waiting download to be admitted")
    response = served[0]
    assert response.status_code == 200
    assert hashlib.sha256(response.content).hexdigest() == expected
    assert response.headers["arkvory-download-class"] == "release"
    assert _arrival(response.headers["arkvory-queue-ticket"]) == _arrival(ticket)
    server.wait_idle()


def test_a_ticket_keeps_the_place_across_a_restart(
    start_server: StartServer, demo_root: Path
) -> None:
    write_pattern_file(demo_root / "busy.bin", 2 * MIB)
    write_pattern_file(demo_root / "wanted.bin", 2 * MIB)
    server = start_server(env=ANSWERED_AT_ONCE)
    assert (demo_root / SETTINGS_FILE).is_file(), "the server made the key at start"
    key = load_or_create_ticket_key(demo_root / SETTINGS_FILE)
    SlotHolder(server, "busy.bin", "holder-before").take()

    # Four downloads queue in this order; each arrival is a distinct millisecond.
    a, forged, edited, b = (
        Client(server, "wanted.bin", f"download-{name}") for name in ("a", "forged", "edited", "b")
    )
    for client in (a, forged, edited, b):
        response = client.get()
        assert response.status_code == 503
        time.sleep(0.01)
    assert [client.position() for client in (a, forged, edited, b)] == [1, 2, 3, 4]
    assert a.ticket is not None and forged.ticket is not None and edited.ticket is not None
    old_arrival = _arrival(a.ticket)

    server.restart()
    assert load_or_create_ticket_key(demo_root / SETTINGS_FILE) == key, "the key changed"
    assert server.readiness()["waiting"] == 0  # the queue itself did not survive
    SlotHolder(server, "busy.bin", "holder-after").take()

    # B comes back first, but without its ticket: it queues anew.
    b.ticket = None
    assert b.get().status_code == 503
    assert b.position() == 1
    # A comes back later with its last ticket: it is put at its old arrival time.
    assert a.get().status_code == 503
    # Tampered tickets are ignored (R-TICKET-3): these downloads queue as new ones.
    signature_flipped = forged.ticket[:-2] + ("A" if forged.ticket[-2] != "A" else "B")
    signature_flipped += forged.ticket[-1]
    assert forged.get(ticket=signature_flipped).status_code == 503
    arrival, rest = edited.ticket.split(".", 2)[1:]
    earlier = _base36(int(arrival, 36) - 60_000)  # claims to have come a minute earlier
    assert edited.get(ticket=f"2.{earlier}.{rest}").status_code == 503

    positions = {
        "a": a.position(),
        "b": b.position(),
        "forged": forged.position(),
        "edited": edited.position(),
    }
    assert positions["a"] < positions["b"], positions
    assert positions["b"] < positions["forged"], positions
    assert positions["b"] < positions["edited"], positions
    assert positions == {"a": 1, "b": 2, "forged": 3, "edited": 4}
    assert a.ticket is not None and _arrival(a.ticket) == old_arrival
    assert forged.ticket is not None and _arrival(forged.ticket) > old_arrival
    assert edited.ticket is not None and _arrival(edited.ticket) > old_arrival


def _base36(value: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    text = ""
    while value:
        value, digit = divmod(value, 36)
        text = digits[digit] + text
    return text or "0"


def test_a_client_may_only_lower_its_class(start_server: StartServer, demo_root: Path) -> None:
    write_pattern_file(demo_root / "wanted.bin", 2 * MIB)
    server = start_server(env=ANSWERED_AT_ONCE)

    lowered = Client(server, "wanted.bin", "lowered").get(
        {"Range": "bytes=0-1023", "Arkvory-Download-Class": "bulk"}
    )
    assert lowered.status_code == 206
    assert lowered.headers["arkvory-download-class"] == "bulk"
    assert server.readiness()["classes"]["bulk"]["active"] == 1

    # A link's class is release: asking for interactive does not raise it (R-CLASS-4).
    raised = Client(server, "wanted.bin", "raised").get({"Arkvory-Download-Class": "interactive"})
    assert raised.status_code == 503
    assert raised.headers["arkvory-download-class"] == "release"
    assert raised.json()["downloadClass"] == "release"

    bogus = Client(server, "wanted.bin", "bogus").get({"Arkvory-Download-Class": "bogus"})
    assert bogus.status_code == 400
    assert bogus.headers["content-type"] == "application/problem+json"
    problem = bogus.json()
    assert problem["status"] == 400
    assert problem["reason"] == "invalid_request"
    assert problem["field"] == "Arkvory-Download-Class"
    assert "bogus" not in bogus.headers.get("arkvory-download-class", "")
    # The refused request took no place in the queue.
    readiness = server.readiness()
    assert (readiness["active"], readiness["waiting"]) == (1, 1)
