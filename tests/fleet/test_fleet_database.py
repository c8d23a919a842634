"""The fleet while its database misbehaves (R-PG-2, R-PG-3, R-SET-4).

* Every 2–5 s for 60 s, every database connection of the three servers is terminated
  (``pg_terminate_backend``; the servers' connections are told apart from everybody
  else's by their ``application_name``). Clients must only ever see ``206`` or ``503``
  — a lost connection is "come back later", never a ``500`` — and after the last kill a
  new session must be granted within 2 s. That session is a person's (``interactive``),
  which may take the slot reserved for its class that the load (``release``) cannot,
  so its wait measures the fleet's recovery and not the queue in front of it.
* PostgreSQL is restarted under load, once with ``-m fast`` and once with
  ``-m immediate`` (a crash and recovery). Sampled every 50 ms, the slot table must
  never show more than ``sessions`` active slots, a session in two slots, or one
  fencing token naming two sessions; every download must complete intact.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import httpx
import pytest

from arkvory_sched import (
    Admitted,
    ByteRange,
    Delivered,
    DownloadRequest,
    PrincipalKind,
    SchedulerSettings,
)
from arkvory_sched.postgres import PostgresScheduler
from arkvory_sched.postgres._ranges import STORAGE_RETRY_AFTER
from tests.pg import database_url

from .conftest import (
    MIB,
    Download,
    Fleet,
    FleetServer,
    SlotSampler,
    Traffic,
    assert_no_dropped_connections,
    fetch,
    held_after_last_byte,
    http_client,
    observe,
    open_range,
    queue_counters,
    report,
    require_cluster_control,
    restart_postgres,
    spread,
    with_application_name,
)

pytestmark = pytest.mark.fleet

NAME_COUNT = 4
SIZE = 24 * MIB
PACE = 16 * MIB  # bytes per second per process
PERSON = "person-token=alice:person"


def _names() -> list[str]:
    return [f"large/image-{n}.bin" for n in range(NAME_COUNT)]


def _start_fleet(fleet: Fleet, env: dict[str, str]) -> list[FleetServer]:
    for name in _names():
        fleet.write_file(name, SIZE)
    writer = fleet.start("writer", gateway=False, env=env, bandwidth=PACE, tokens=[PERSON])
    gateways = [
        fleet.start(f"gateway-{n}", env=env, bandwidth=PACE, tokens=[PERSON], wait=False)
        for n in (1, 2)
    ]
    for gateway in gateways:
        gateway.wait_started()
    return [writer, *gateways]


def _check_downloads(fleet: Fleet, downloads: Sequence[Download]) -> None:
    for download in downloads:
        assert download.offset == download.size, download.download_id
        assert download.hexdigest() == fleet.digests[download.name], download.download_id


# --- pg_terminate_backend -----------------------------------------------------------------

# Every connection of the fleet is terminated every 2-5 s for this long: at least
# TERMINATE_SECONDS // 5 rounds. Long enough that downloads finish through several
# rounds; a longer soak belongs in benchmarks/, not in the suite's ten minutes.
TERMINATE_SECONDS = 20.0
LONGEST_GAP = 5.0
LOAD_CLIENTS = 24
# What a client is promised after database trouble: its 503 says Retry-After
# STORAGE_RETRY_AFTER, and a client that follows it is granted by its second return. The
# probe asks every 100 ms, so it usually sees the grant far sooner (0.5 s on a quiet
# machine), but reconnecting three servers' pools on a loaded 2-core machine has taken
# just over 2 s, which is no broken promise.
FIRST_GRANT_BOUND = 2.0 * STORAGE_RETRY_AFTER

TERMINATE_FLEET = """
SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid()
  AND left(application_name, length($1)) = $1
"""


@dataclass
class Probe:
    """A new interactive session started right after the last kill."""

    statuses: list[int]
    granted_after: float | None = None


async def _keep_downloading(
    number: int,
    http: httpx.AsyncClient,
    servers: list[FleetServer],
    traffic: Traffic,
    done: list[Download],
) -> None:
    """One load client: one download after another, each with a new download id."""
    for serial in range(1_000_000):
        name = _names()[(number + serial) % NAME_COUNT]
        download = Download(f"load-{number}-{serial}", name, SIZE)
        await fetch(download, http, servers, traffic, deadline=time.monotonic() + 600.0)
        done.append(download)


async def _probe(
    http: httpx.AsyncClient, servers: list[FleetServer], since: float, probe: Probe
) -> None:
    """Ask every 100 ms, any server, until the new session's first range is granted."""
    deadline = time.monotonic() + 30.0
    while time.monotonic() < deadline:
        try:
            response = await open_range(
                http,
                random.choice(servers),
                _names()[0],
                "probe-after-the-last-kill",
                f"bytes=0-{MIB - 1}",
                headers={"Authorization": "Bearer person-token"},
            )
        except httpx.TransportError:
            probe.statuses.append(0)
        else:
            probe.statuses.append(response.status_code)
            await response.aclose()
            if response.status_code == 206:
                probe.granted_after = time.monotonic() - since
                return
        await asyncio.sleep(0.1)


async def _terminate_repeatedly(
    fleet: Fleet, servers: list[FleetServer], traffic: Traffic, done: list[Download]
) -> tuple[list[int], Probe]:
    killer = await observe()
    terminated: list[int] = []
    probe = Probe([])
    try:
        async with http_client() as http:
            load = [
                asyncio.create_task(_keep_downloading(n, http, servers, traffic, done))
                for n in range(LOAD_CLIENTS)
            ]
            started = time.monotonic()
            while True:
                gap = random.uniform(2.0, LONGEST_GAP)
                if time.monotonic() + gap - started > TERMINATE_SECONDS:
                    break
                await asyncio.sleep(gap)
                prefix = f"{fleet.schema}-"
                terminated.append(await killer.fetchval(TERMINATE_FLEET, prefix))
            await _probe(http, servers, time.monotonic(), probe)
            for task in load:
                task.cancel()
            outcomes = await asyncio.gather(*load, return_exceptions=True)
            failures = [o for o in outcomes if not isinstance(o, asyncio.CancelledError)]
            assert not failures, failures[:3]
    finally:
        await killer.close()
    return terminated, probe


def test_terminated_connections_answer_503_never_500(fleet: Fleet) -> None:
    env = {"ARKVORY_MAX_DOWNLOAD_SESSIONS": "8", "ARKVORY_DOWNLOAD_RESERVE": "1"}
    servers = _start_fleet(fleet, env)
    traffic = Traffic()
    done: list[Download] = []
    sampler = SlotSampler(fleet.schema, 8)
    with sampler.running():
        terminated, probe = asyncio.run(_terminate_repeatedly(fleet, servers, traffic, done))

    report(
        f"pg_terminate_backend on every server connection every 2-5 s for {TERMINATE_SECONDS:g} s",
        {
            "kills": len(terminated),
            "backends terminated": f"{sum(terminated)} (per kill: {_range_of(terminated)})",
            "statuses": dict(sorted(traffic.statuses.items())),
            "503 reasons": dict(traffic.reasons),
            "transport errors": dict(traffic.transport_errors) or 0,
            "downloads completed": len(done),
            "max active sessions (slot table)": f"{sampler.max_active} (limit 8)",
            "samples": sampler.samples,
            "probe statuses": probe.statuses,
            "last kill → first grant of a new session": "never"
            if probe.granted_after is None
            else f"{probe.granted_after:.2f} s (bound {FIRST_GRANT_BOUND:g} s)",
        },
    )
    assert len(terminated) >= TERMINATE_SECONDS // LONGEST_GAP and sum(terminated) > 0
    assert set(traffic.statuses) <= {206, 503}, traffic.statuses
    assert set(probe.statuses) <= {206, 503}, probe.statuses
    assert_no_dropped_connections(traffic)
    assert not sampler.violations, sampler.violations[:10]
    assert done, f"no download completed in {TERMINATE_SECONDS:g} s"
    _check_downloads(fleet, done)
    assert probe.granted_after is not None and probe.granted_after <= FIRST_GRANT_BOUND


def _range_of(values: Sequence[int]) -> str:
    return f"{min(values, default=0)}-{max(values, default=0)}"


# --- PostgreSQL restarts ------------------------------------------------------------------

RESTART_CLIENTS = 40
SESSIONS = 8
IDLE_SECONDS = 10.0  # ARKVORY_DOWNLOAD_IDLE_SECONDS (default 30): how long a lost record costs


@dataclass
class Restart:
    mode: str
    seconds: float  # how long ``pg_ctlcluster restart`` took (down and up again)


async def _restart_under_load(
    servers: list[FleetServer], downloads: list[Download], traffic: Traffic
) -> tuple[list[Restart], float]:
    restarts: list[Restart] = []
    async with http_client() as http:
        started = time.monotonic()
        clients = asyncio.gather(
            *(fetch(d, http, servers, traffic, deadline=started + 240.0) for d in downloads)
        )
        for mode in ("fast", "immediate"):
            await asyncio.sleep(4.0)
            began = time.monotonic()
            await asyncio.to_thread(restart_postgres, mode)
            restarts.append(Restart(mode, time.monotonic() - began))
        await clients
        return restarts, time.monotonic() - started


def test_postgres_restarts_under_load_never_double_grant(fleet: Fleet) -> None:
    require_cluster_control()
    env = {
        "ARKVORY_MAX_DOWNLOAD_SESSIONS": str(SESSIONS),
        "ARKVORY_DOWNLOAD_IDLE_SECONDS": f"{IDLE_SECONDS:g}",
    }
    servers = _start_fleet(fleet, env)
    downloads = [
        Download(f"restart-{n:02d}", _names()[n % NAME_COUNT], SIZE) for n in range(RESTART_CLIENTS)
    ]
    traffic = Traffic()
    sampler = SlotSampler(fleet.schema, SESSIONS)
    with sampler.running():
        restarts, wall = asyncio.run(_restart_under_load(servers, downloads, traffic))
        # Every slot comes back: sessions whose last delivery record was lost in a
        # restart end by the idle rule instead of at once (the bytes were sent).
        drained = sampler.wait_until_empty(IDLE_SECONDS + 5.0)
    counters = asyncio.run(queue_counters(fleet.schema))
    held_after = held_after_last_byte(sampler, downloads)
    lingering = [held for held in held_after if held > 1.0]

    report(
        f"PostgreSQL restarts (fast, immediate) under {RESTART_CLIENTS} clients",
        {
            "restarts": ", ".join(f"{r.mode} {r.seconds:.1f} s" for r in restarts),
            "wall time": f"{wall:.1f} s",
            "samples of the slot table": sampler.samples,
            "longest gap between samples": f"{sampler.longest_gap:.2f} s",
            "sampler reconnects": sampler.reconnects,
            "failed reads of the slot table": dict(sampler.errors) or 0,
            "max active sessions": f"{sampler.max_active} (limit {SESSIONS})",
            "fencing tokens seen": len(sampler.grants),
            "invariant violations": len(sampler.violations),
            "statuses": dict(sorted(traffic.statuses.items())),
            "503 reasons": dict(traffic.reasons),
            "transport errors": dict(traffic.transport_errors) or 0,
            "completed": f"{sum(d.offset == SIZE for d in downloads)} of {len(downloads)}",
            "download complete after": spread(
                [d.finished - d.started for d in downloads if d.finished and d.started]
            ),
            "queue counters": counters,
            "sessions holding their slot > 1 s after their last byte": f"{len(lingering)}"
            f" (longest {max(held_after, default=0.0):.1f} s; idle rule {IDLE_SECONDS:g} s)",
            "last download → slot table empty": f"{drained:.1f} s",
        },
    )
    assert not sampler.violations, sampler.violations[:10]
    assert sampler.max_active <= SESSIONS
    _check_downloads(fleet, downloads)
    assert set(traffic.statuses) <= {206, 503}, traffic.statuses
    assert_no_dropped_connections(traffic)


# --- the same, in one process: the smallest reproduction ----------------------------------

HAMMER_KILLS = 60


async def _hammer(schema: str) -> tuple[Counter[str], Counter[str], int]:
    """Admit, report and tick on 8 tasks while the pool's backends are terminated."""
    prefix = f"{schema}-in-process"
    scheduler = await PostgresScheduler.connect(
        with_application_name(database_url(), prefix),
        schema=schema,
        settings=SchedulerSettings(sessions=4, reserve=0),
        migrate=False,
    )
    admin = await observe()
    decisions: Counter[str] = Counter()
    escaped: Counter[str] = Counter()
    stop = asyncio.Event()
    terminated = 0

    async def admit(worker: int) -> None:
        serial = 0
        while not stop.is_set():
            serial += 1
            request = DownloadRequest(
                principal=f"p{worker}",
                principal_kind=PrincipalKind.SERVICE,
                object_id="large/object.bin",
                object_size=64 * MIB,
                byte_range=ByteRange(0, MIB),
                download_id=f"hammer-{worker}-{serial % 3}",
                client_address="127.0.0.1",
            )
            try:
                decision = await scheduler.admit(request)
                decisions[type(decision).__name__] += 1
                if isinstance(decision, Admitted):
                    await scheduler.report(decision.grant, Delivered(decision.grant.byte_range))
            except Exception as error:  # what the middleware would turn into a 500
                escaped[f"admit/report: {type(error).__name__}"] += 1
            await asyncio.sleep(0)

    async def tick() -> None:
        while not stop.is_set():
            try:
                await scheduler.tick()
            except Exception as error:  # what ends the tick loop and the lifespan
                escaped[f"tick: {type(error).__name__}"] += 1
            await asyncio.sleep(0.01)

    async def kill() -> None:
        nonlocal terminated
        for _ in range(HAMMER_KILLS):
            await asyncio.sleep(0.03)
            terminated += await admin.fetchval(TERMINATE_FLEET, prefix)
        stop.set()

    try:
        await asyncio.gather(kill(), tick(), *(admit(n) for n in range(8)))
    finally:
        await scheduler.close()
        await scheduler.disconnect()
        await admin.close()
    return decisions, escaped, terminated


def test_scheduler_calls_survive_connections_terminated_mid_query(fleet_schema: str) -> None:
    """A connection terminated in the middle of a query is database trouble like any
    other: ``admit`` answers 503 and ``tick`` carries on (asyncpg then raises
    ``InternalClientError``, which is neither a ``PostgresError`` nor an
    ``InterfaceError``)."""
    decisions, escaped, terminated = asyncio.run(_hammer(fleet_schema))
    report(
        "one PostgresScheduler, backends terminated every 30 ms",
        {"backends terminated": terminated, "decisions": dict(decisions), "escaped": dict(escaped)},
    )
    assert terminated > 0 and decisions
    assert not escaped, escaped
