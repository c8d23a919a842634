"""Processes that die or freeze while they hold slot leases (R-PG-3).

* SIGKILL: ten read gateways each hold two sessions with responses in flight and are
  killed one after another, at different phases of the 1 s heartbeat and the 500 ms
  tick. Each slot must be free again within ``lease + tick interval + 1 s`` of the kill
  (the interval the leader's ticks really had: 500 ms, ten times a slow tick, or as far
  apart as its renewals of the leader lease came on a loaded machine), and never before
  its lease ran out: no 50 ms sample of the slot table taken before the expiry of the
  last renewal may show it free.
* SIGKILL of the leader: the same, for the process that runs the reaper. A new leader
  first waits one lease period before it frees anything (so that it never frees a live
  peer's work), so the bound is longer; the figure is printed.
* SIGSTOP: a frozen holder outlives its lease, the slot goes to a waiting client with a
  new fencing token, and the holder is resumed. Nothing it does afterwards — renewal,
  delivery record, touch — may change the new holder's row or the old session, while
  its response that was in flight when it froze does run on; how long and how many
  bytes is printed.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from dataclasses import dataclass, field

import asyncpg
import httpx
import pytest

from .conftest import (
    MIB,
    SAMPLE_SECONDS,
    TICK_SECONDS,
    Fleet,
    FleetServer,
    SlotRow,
    http_client,
    key_of,
    node_of,
    observe,
    open_range,
    report,
    slot_rows,
    spread,
    wait_for_leader,
)

pytestmark = pytest.mark.fleet

LEASE_SECONDS = 3.0
LEADER_SECONDS = 3.0  # PostgresScheduler's leader lease (not configurable from the CLI)
NAME = "large/held.bin"
SIZE = 24 * MIB
PACE = 2 * MIB  # bytes per second per process: a response in flight stays in flight


@dataclass
class Held:
    """One slot lease of a process that is about to be killed, and what became of it."""

    server: str
    slot_no: int
    token: int
    killed_at: float = 0.0
    expires_at: float = 0.0  # the latest expiry seen while held (the last renewal + lease)
    last_held: float = 0.0  # database clock of the last sample that showed it held
    freed: float | None = None  # database clock of the first sample that showed it free

    @property
    def last_renewal(self) -> float:
        return self.expires_at - LEASE_SECONDS


async def _hold_two(http: httpx.AsyncClient, server: FleetServer, tag: str) -> list[httpx.Response]:
    """Two sessions through ``server``, each with a response that stays in flight."""
    responses = []
    for n in range(2):
        response = await open_range(http, server, NAME, f"{tag}-{n}", "bytes=0-")
        assert response.status_code == 206, (server.name, response.status_code)
        responses.append(response)
    return responses


class Watch:
    """Samples the slot table and the leader row every 50 ms, and the leader's tick
    duration every 100 ms, until every watched lease is free.

    The leader renews its lease in ``queue_leader`` on every tick, the tick that reaps
    too: the renewals seen (each sets ``expires_at`` to its own time plus the leader
    lease) show how far apart the leader's ticks really came, however loaded the
    machine was, and so when its reaper ran at the latest.
    """

    def __init__(self, held: list[Held], leader: FleetServer | None = None) -> None:
        self.held = held
        self.leader = leader  # whose tick duration to watch (None: nobody's)
        self.leaders: set[str] = set()  # every node seen leading meanwhile
        self.max_tick = 0.0
        self.renewals: dict[str, set[float]] = {}  # node -> every lease expiry seen

    def longest_renewal_gap(self, node: str | None = None) -> float:
        """The longest time between two renewals of the leader lease seen (by ``node``,
        or by whoever led), on the database's clock: one tick interval, as it was."""
        nodes = [node] if node is not None else list(self.renewals)
        gaps = [
            later - earlier
            for name in nodes
            for earlier, later in itertools.pairwise(sorted(self.renewals.get(name, ())))
        ]
        return max(gaps, default=0.0)

    @property
    def tick_interval(self) -> float:
        """The longest pause between two leader ticks: 500 ms, or ten times a slow
        tick's duration (``next_tick_delay``), or the longest the renewals show."""
        return max(TICK_SECONDS, 10.0 * self.max_tick, self.longest_renewal_gap())

    async def run(self, connection: asyncpg.Connection, until: float) -> None:
        ticks = asyncio.create_task(self._ticks(until))
        try:
            await self._slots(connection, until)
        finally:
            ticks.cancel()
            await asyncio.gather(ticks, return_exceptions=True)

    async def _slots(self, connection: asyncpg.Connection, until: float) -> None:
        while time.monotonic() < until:
            db_now, rows = await slot_rows(connection)
            row = await connection.fetchrow(
                "SELECT node_id, extract(epoch FROM expires_at)::float8 AS expires_at "
                "FROM queue_leader WHERE expires_at > now()"
            )
            leader = None if row is None else row["node_id"]
            self.leaders.add(str(leader))
            if row is not None:
                self.renewals.setdefault(str(leader), set()).add(row["expires_at"])
            by_slot = {row.slot_no: row for row in rows}
            for lease in self.held:
                if lease.freed is not None:
                    continue
                row = by_slot[lease.slot_no]
                if row.session_key is not None and row.token == lease.token:
                    lease.last_held = db_now
                    lease.expires_at = max(lease.expires_at, row.expires_at or 0.0)
                else:
                    lease.freed = db_now
            if self.held and all(lease.freed is not None for lease in self.held):
                return
            await asyncio.sleep(SAMPLE_SECONDS)

    async def _ticks(self, until: float) -> None:
        if self.leader is None:
            return
        async with httpx.AsyncClient(timeout=5.0) as http:
            while time.monotonic() < until:
                with contextlib.suppress(httpx.HTTPError, ValueError):
                    document = (await http.get(f"{self.leader.base_url}/readyz")).json()
                    self.max_tick = max(self.max_tick, float(document["lastTickSeconds"]))
                await asyncio.sleep(0.1)


async def _leases_of(connection: asyncpg.Connection, server: FleetServer) -> list[Held]:
    node = await node_of(connection, server)
    _, rows = await slot_rows(connection)
    return [
        Held(server.name, row.slot_no, row.token, expires_at=row.expires_at or 0.0)
        for row in rows
        if row.holder == node and row.session_key is not None
    ]


# --- SIGKILL ------------------------------------------------------------------------------

VICTIMS = 10
KILL_SPACING = 0.37  # seconds between kills: a different phase of heartbeat and tick each


async def _kill_holders(fleet: Fleet, writer: FleetServer, victims: list[FleetServer]) -> Watch:
    watcher = await observe(fleet.schema)
    killer = await observe(fleet.schema)
    try:
        await wait_for_leader(watcher, await node_of(watcher, writer), 15.0)
        async with http_client(timeout=60.0) as http:
            responses = []
            for index, victim in enumerate(victims):
                responses += await _hold_two(http, victim, f"victim-{index}")
            for victim in victims:
                leases = await _leases_of(killer, victim)
                assert len(leases) == 2, f"{victim.name} holds {len(leases)} slots"
            watch = Watch([], writer)
            last_kill = time.monotonic() + VICTIMS * KILL_SPACING
            watching = asyncio.create_task(
                watch.run(watcher, last_kill + LEASE_SECONDS + TICK_SECONDS + 15.0)
            )
            for victim in victims:
                await asyncio.sleep(KILL_SPACING)
                leases = await _leases_of(killer, victim)
                # In a thread: waiting for the process to go must not hold up the watch.
                killed_at = await asyncio.to_thread(victim.kill)
                for lease in leases:
                    lease.killed_at = killed_at
                watch.held += leases
            await watching
            for response in responses:
                await response.aclose()
            return watch
    finally:
        await watcher.close()
        await killer.close()


def test_sigkill_of_holders_frees_their_slots_after_the_lease(fleet: Fleet) -> None:
    fleet.write_file(NAME, SIZE)
    env = {"ARKVORY_MAX_DOWNLOAD_SESSIONS": str(2 * VICTIMS + 4)}
    writer = fleet.start("writer", gateway=False, lease_seconds=LEASE_SECONDS, env=env)
    victims = [
        fleet.start(f"victim-{n}", lease_seconds=LEASE_SECONDS, env=env, bandwidth=PACE, wait=False)
        for n in range(VICTIMS)
    ]
    for victim in victims:
        victim.wait_started()

    watch = asyncio.run(_kill_holders(fleet, writer, victims))

    held = watch.held
    # The leader reaps on its tick, every 500 ms, or ten times the last tick's duration
    # when ticks get slow (a loaded machine): the bound follows the interval observed.
    bound = LEASE_SECONDS + watch.tick_interval + 1.0
    freed = [lease.freed - lease.killed_at for lease in held if lease.freed is not None]
    report(
        f"SIGKILL of {VICTIMS} gateways holding 2 leases each (lease {LEASE_SECONDS:g} s)",
        {
            "kills": VICTIMS,
            "leases watched": len(held),
            "kill → slot free": spread(freed) + f" (bound {bound:.2f} s)",
            "last renewal → kill": spread([h.killed_at - h.last_renewal for h in held]),
            "lease expiry → slot free": spread(
                [h.freed - h.expires_at for h in held if h.freed is not None]
            ),
            "leader's longest tick": f"{watch.max_tick * 1000:.0f} ms "
            f"(tick interval up to {watch.tick_interval:.2f} s)",
            "leaders meanwhile": len(watch.leaders),
        },
    )
    assert len(watch.leaders) == 1, f"the leader changed: {watch.leaders}"
    assert len(held) == 2 * VICTIMS
    for lease in held:
        assert lease.freed is not None, f"{lease} never freed"
        assert lease.freed - lease.killed_at <= bound, f"{lease} freed late"
        assert lease.freed >= lease.expires_at, f"{lease} freed before its lease expired"


async def _kill_leader(fleet: Fleet, leader: FleetServer) -> tuple[list[Held], Watch, str]:
    """Kill the leader holding two leases; what became of them, the watch, and the old
    leader's node id."""
    watcher = await observe(fleet.schema)
    try:
        old = await node_of(watcher, leader)
        await wait_for_leader(watcher, old, 15.0)
        async with http_client(timeout=60.0) as http:
            responses = await _hold_two(http, leader, "leader")
            # A full lease period of renewals first, as a real holder would have had.
            await asyncio.sleep(LEASE_SECONDS)
            held = await _leases_of(watcher, leader)
            assert len(held) == 2
            killed_at = await asyncio.to_thread(leader.kill)
            for lease in held:
                lease.killed_at = killed_at
            watch = Watch(held)
            await watch.run(watcher, time.monotonic() + 3 * LEASE_SECONDS + 15.0)
            for response in responses:
                await response.aclose()
            return held, watch, old
    finally:
        await watcher.close()


def test_sigkill_of_the_leader_frees_its_slots_after_a_new_leaders_grace(fleet: Fleet) -> None:
    fleet.write_file(NAME, SIZE)
    env = {"ARKVORY_MAX_DOWNLOAD_SESSIONS": "4"}
    leader = fleet.start(
        "writer", gateway=False, lease_seconds=LEASE_SECONDS, env=env, bandwidth=PACE
    )
    for n in (1, 2):
        fleet.start(f"gateway-{n}", lease_seconds=LEASE_SECONDS, env=env)

    held, watch, old = asyncio.run(_kill_leader(fleet, leader))

    # The leader lease runs out, a gateway takes over at its next tick, and a new leader
    # gives every holder one lease period before it reaps, at its next tick (R-PG-3). A
    # tick comes every 500 ms, or as far apart as the new leader's renewals show they
    # came (a loaded machine): that process's ticks before it led came no faster.
    new = [node for node in watch.renewals if node != old]
    tick = max([TICK_SECONDS, *(watch.longest_renewal_gap(node) for node in new)])
    bound = LEADER_SECONDS + tick + LEASE_SECONDS + tick + 1.0
    freed = [lease.freed - lease.killed_at for lease in held if lease.freed is not None]
    report(
        f"SIGKILL of the leader holding 2 leases (lease {LEASE_SECONDS:g} s)",
        {
            "kill → slot free": spread(freed) + f" (bound {bound:.2f} s)",
            "lease expiry → slot free": spread(
                [h.freed - h.expires_at for h in held if h.freed is not None]
            ),
            "new leader's longest pause between ticks": f"{tick:.2f} s",
        },
    )
    for lease in held:
        assert lease.freed is not None, f"{lease} never freed"
        assert lease.freed - lease.killed_at <= bound, f"{lease} freed late"
        assert lease.freed >= lease.expires_at, f"{lease} freed before its lease expired"


# --- SIGSTOP ------------------------------------------------------------------------------

RANGE = 8 * MIB

A_SESSION = """
SELECT state, delivered::text AS delivered, last_activity
FROM download_session WHERE session_key = $1
"""


@dataclass
class Stream:
    """The bytes of one response as they arrived (wall-clock times)."""

    chunks: list[tuple[float, int]] = field(default_factory=list)
    ended: float | None = None
    error: str | None = None

    @property
    def received(self) -> int:
        return sum(size for _, size in self.chunks)

    def received_since(self, moment: float) -> int:
        return sum(size for at, size in self.chunks if at >= moment)


async def _read(response: httpx.Response, stream: Stream) -> None:
    try:
        async for chunk in response.aiter_raw():
            stream.chunks.append((time.time(), len(chunk)))
    except httpx.TransportError as error:
        stream.error = type(error).__name__
    finally:
        stream.ended = time.time()
        await response.aclose()


async def _queue_until_granted(
    http: httpx.AsyncClient, server: FleetServer, download_id: str, positions: list[int]
) -> httpx.Response:
    """A waiting client polling every 200 ms until its first range is granted."""
    deadline = time.monotonic() + 30.0
    while time.monotonic() < deadline:
        response = await open_range(http, server, NAME, download_id, f"bytes=0-{RANGE - 1}")
        if response.status_code == 206:
            return response
        await response.aread()
        assert response.status_code == 503, response.status_code
        position = response.headers.get("arkvory-queue-position")
        if position is not None:
            positions.append(int(position))
        await asyncio.sleep(0.2)
    raise AssertionError(f"{download_id} was never granted")


@dataclass
class Frozen:
    """What the SIGSTOP scenario observed."""

    stopped_at: float
    reaped_at: float  # database clock: the first sample without the frozen lease
    granted_at: float  # the new holder's 206
    resumed_at: float
    zombie: Stream  # the response in flight when the holder froze
    newcomer: Stream  # the new holder's first range
    row_granted: SlotRow  # the slot right after the new grant ...
    row_later: SlotRow  # ... and after the resumed process ticked twice
    session_before: dict[str, object]  # the frozen session before SIGCONT ...
    session_after: dict[str, object]  # ... and after


async def _wait_for_heartbeat(db: asyncpg.Connection, node: str, after: float) -> None:
    deadline = time.monotonic() + 15.0
    while True:
        beat = await db.fetchval(
            "SELECT extract(epoch FROM heartbeat_at)::float8 FROM fleet_node WHERE node_id = $1",
            node,
        )
        if beat is not None and beat >= after:
            return
        assert time.monotonic() < deadline, f"{node} does not beat after {after}"
        await asyncio.sleep(SAMPLE_SECONDS)


async def _freeze_holder(fleet: Fleet, writer: FleetServer, zombie: FleetServer) -> Frozen:
    db = await observe(fleet.schema)
    try:
        writer_node = await node_of(db, writer)
        zombie_node = await node_of(db, zombie)
        await wait_for_leader(db, writer_node, 15.0)
        key_a, key_c = key_of(NAME, "frozen-a"), key_of(NAME, "waiter-c")
        async with http_client(timeout=60.0) as http:
            # A: a range in flight from the process about to freeze.
            response_a = await open_range(http, zombie, NAME, "frozen-a", f"bytes=0-{RANGE - 1}")
            assert response_a.status_code == 206
            a = Stream()
            reading_a = asyncio.create_task(_read(response_a, a))
            # C: waits for the one slot, polling another process.
            positions: list[int] = []
            granting_c = asyncio.create_task(
                _queue_until_granted(http, writer, "waiter-c", positions)
            )
            deadline = time.monotonic() + 10.0
            while a.received < MIB or not positions:
                assert time.monotonic() < deadline, "A does not stream or C does not queue"
                await asyncio.sleep(SAMPLE_SECONDS)
            _, (row_a,) = await slot_rows(db)
            assert (row_a.session_key, row_a.holder) == (key_a, zombie_node)

            stopped_at = zombie.pause()
            reaped_at: float | None = None
            deadline = time.monotonic() + LEASE_SECONDS + 15.0
            while reaped_at is None or not granting_c.done():
                assert time.monotonic() < deadline, "the frozen holder's slot was never reaped"
                db_now, (row,) = await slot_rows(db)
                if reaped_at is None and row.token != row_a.token:
                    reaped_at = db_now
                await asyncio.sleep(SAMPLE_SECONDS)
            c = Stream()
            reading_c = asyncio.create_task(_read(granting_c.result(), c))
            granted_at = time.time()
            _, (row_granted,) = await slot_rows(db)
            assert row_granted.session_key == key_c, "the slot went to someone else"
            assert row_granted.token > row_a.token
            session_before = dict(await db.fetchrow(A_SESSION, key_a))

            resumed_at = zombie.resume()
            await asyncio.wait_for(reading_a, 30.0)
            assert a.ended is not None
            # The resumed process reports A's range, then renews and touches at its next
            # heartbeats: wait until it has beaten twice after all that.
            await _wait_for_heartbeat(db, zombie_node, max(resumed_at, a.ended) + 2.0)
            _, (row_later,) = await slot_rows(db)
            session_after = dict(await db.fetchrow(A_SESSION, key_a))
            await asyncio.wait_for(reading_c, 30.0)
        return Frozen(
            stopped_at,
            reaped_at,
            granted_at,
            resumed_at,
            a,
            c,
            row_granted,
            row_later,
            session_before,
            session_after,
        )
    finally:
        await db.close()


def test_sigstop_past_the_lease_fences_the_resumed_holder(fleet: Fleet) -> None:
    fleet.write_file(NAME, SIZE)
    # C's answers are how the test sees it wait: held at the door (R-HOLD-2) for a slot
    # the frozen holder keeps, it would get none until the lease is reaped.
    env = {"ARKVORY_MAX_DOWNLOAD_SESSIONS": "1", "ARKVORY_DOWNLOAD_HOLD_SECONDS": "0"}
    writer = fleet.start(
        "writer", gateway=False, lease_seconds=LEASE_SECONDS, env=env, bandwidth=PACE
    )
    zombie = fleet.start("zombie", lease_seconds=LEASE_SECONDS, env=env, bandwidth=PACE)

    seen = asyncio.run(_freeze_holder(fleet, writer, zombie))

    zombie_stream, newcomer = seen.zombie, seen.newcomer
    assert zombie_stream.ended is not None and newcomer.ended is not None
    after_resume = zombie_stream.received_since(seen.resumed_at)
    overlap = min(zombie_stream.ended, newcomer.ended) - max(seen.resumed_at, seen.granted_at)
    report(
        f"SIGSTOP of a holder past its lease ({LEASE_SECONDS:g} s), then SIGCONT",
        {
            "stop → slot reaped": f"{seen.reaped_at - seen.stopped_at:.2f} s",
            "stop → new holder streams": f"{seen.granted_at - seen.stopped_at:.2f} s",
            "fencing tokens": f"{seen.row_granted.token} (new holder), older for the frozen one",
            "frozen response: bytes before SIGSTOP": zombie_stream.received - after_resume,
            "bytes the zombie sent after SIGCONT": f"{after_resume} ({after_resume / MIB:.1f} MiB)",
            "zombie response ran on after SIGCONT": f"{zombie_stream.ended - seen.resumed_at:.2f} s"
            f" ({zombie_stream.received} of {RANGE} bytes"
            f"{', ' + zombie_stream.error if zombie_stream.error else ''})",
            "two sessions streaming on one slot for": f"{max(0.0, overlap):.2f} s",
            "frozen session before / after SIGCONT": f"{seen.session_before} / "
            f"{seen.session_after}",
        },
    )
    # The resumed holder's renewal, delivery record and touches matched no row: the new
    # holder keeps its session, token and holder (only its own renewals move the expiry).
    granted, later = seen.row_granted, seen.row_later
    assert (later.session_key, later.token, later.holder) == (
        granted.session_key,
        granted.token,
        granted.holder,
    )
    # The frozen session was paused when its lease was reaped; nothing the zombie did
    # afterwards changed it (its range was never recorded as delivered).
    assert seen.session_before["state"] == 2
    assert seen.session_after == seen.session_before
