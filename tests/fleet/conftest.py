"""Fixtures of the fleet suite: several demo servers on one PostgreSQL queue, and faults.

Each test gets a throwaway migrated schema and a directory of deterministic files, and
starts real ``python -m arkvory_sched.demo serve --dsn …`` processes on them (one writer
and read gateways, each a uvicorn server of its own). The tests then hurt the fleet:
SIGKILL, SIGSTOP, terminated database connections, a restarted PostgreSQL. Nothing is
mocked, and nothing is skipped under ``CI=true``: :func:`tests.pg.require_database` fails
there instead.

Every server's database connections carry ``application_name=<schema>-<server>`` (a
query parameter of the DSN, which asyncpg passes on as a server setting), so a test can
find and terminate exactly the backends of its own servers and nobody else's.

At teardown every process is resumed (a stopped one would not die of SIGTERM), stopped
and, after a grace period, killed; the schema is dropped; and PostgreSQL is started
again if a test left it down.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Generator, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import asyncpg
import httpx
import pytest

from arkvory_sched._session_keys import session_key
from arkvory_sched.postgres._boundary import DRIVER_ERRORS
from tests.integration.conftest import wait_listening, wait_ready, write_pattern_file
from tests.pg import database_url, drop_schema, new_schema, require_database

MIB: Final = 1024 * 1024
HOST: Final = "127.0.0.1"
RANGE_BYTES: Final = 8 * MIB
STARTUP_SECONDS: Final = 60.0  # many processes starting at once on two loaded cores
STOP_GRACE_SECONDS: Final = 3.0
SAMPLE_SECONDS: Final = 0.05
#: How long one read of the slot table may take before the sampler reconnects.
SAMPLE_TIMEOUT_SECONDS: Final = 2.0
OBSERVER_APPLICATION: Final = "arkvory-fleet-observer"
#: One tick of the scheduler (``BASE_TICK_SECONDS``): the reaper runs at most this late.
TICK_SECONDS: Final = 0.5

#: Sessions for the fleet tests: no interactive reserve unless a test asks for one,
#: and objects above 16 MiB (the default threshold) use sessions.
FLEET_ENV: Final[Mapping[str, str]] = {
    "ARKVORY_DOWNLOAD_RESERVE": "0",
    "ARKVORY_DOWNLOAD_PREEMPT": "false",
}


# --- PostgreSQL ---------------------------------------------------------------------------


def with_application_name(url: str, name: str) -> str:
    """``url`` with ``application_name=name`` among its query parameters."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "application_name"]
    query.append(("application_name", name))
    return urlunsplit(parts._replace(query=urlencode(query)))


async def observe(schema: str | None = None) -> asyncpg.Connection:
    """A connection of the test itself (never terminated by the tests' own kills)."""
    settings = {"application_name": OBSERVER_APPLICATION}
    if schema is not None:
        settings["search_path"] = schema
    return await asyncpg.connect(database_url(), timeout=3.0, server_settings=settings)


#: What a connection or query raises while PostgreSQL is down, starting or restarting.
NOT_ANSWERING: Final[tuple[type[BaseException], ...]] = (OSError, TimeoutError, *DRIVER_ERRORS)


def postgres_answers(timeout: float = 2.0) -> bool:
    """Whether the test database accepts a connection and a query right now."""

    async def probe() -> None:
        connection = await asyncpg.connect(database_url(), timeout=timeout)
        try:
            await connection.fetchval("SELECT 1", timeout=timeout)
        finally:
            await connection.close()

    try:
        asyncio.run(asyncio.wait_for(probe(), timeout + 1.0))
    except NOT_ANSWERING:
        return False
    return True


def wait_for_postgres(timeout: float) -> float:
    """Wait until PostgreSQL answers; return the seconds it took (fails at ``timeout``)."""
    started = time.monotonic()
    while not postgres_answers():
        if time.monotonic() - started >= timeout:
            pytest.fail(f"PostgreSQL did not answer within {timeout} s")
        time.sleep(0.1)
    return time.monotonic() - started


def _cluster() -> tuple[str, str]:
    """``(version, name)`` of the local Debian cluster, e.g. ``("15", "main")``."""
    versions = sorted(os.listdir("/etc/postgresql"), key=lambda v: [int(p) for p in v.split(".")])
    return versions[-1], "main"


def require_cluster_control() -> None:
    """Skip without ``pg_ctlcluster`` (fail under ``CI=true``): restarts need it."""
    if shutil.which("pg_ctlcluster") is not None and Path("/etc/postgresql").is_dir():
        return
    reason = "pg_ctlcluster (a local Debian PostgreSQL cluster) is not available"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (CI=true: the fleet tests must run)")
    pytest.skip(reason)


def pg_ctlcluster(action: str, *options: str) -> None:
    version, name = _cluster()
    argv = ["pg_ctlcluster", "--skip-systemctl-redirect", *options, version, name, action]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0 and not (action == "start" and done.returncode == 2):
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")


def restart_postgres(mode: str) -> None:
    """``pg_ctlcluster … restart`` with shutdown mode ``fast`` or ``immediate``."""
    pg_ctlcluster("restart", "-m", mode)


def ensure_postgres() -> None:
    """Start PostgreSQL if it does not answer, and wait until it does."""
    if postgres_answers():
        return
    if shutil.which("pg_ctlcluster") is not None:
        pg_ctlcluster("start")
    wait_for_postgres(60.0)


@pytest.fixture(autouse=True)
def postgres_left_running() -> Iterator[None]:
    """Whatever a test did to PostgreSQL, it answers again when the test is over."""
    yield
    ensure_postgres()


@pytest.fixture
def fleet_schema() -> Iterator[str]:
    """A throwaway migrated schema, dropped after the test (and after its servers)."""
    require_database()
    schema = asyncio.run(new_schema("fleet"))
    try:
        yield schema
    finally:
        ensure_postgres()
        asyncio.run(drop_schema(schema))


# --- the servers --------------------------------------------------------------------------


class FleetServer:
    """One ``arkvory_sched.demo serve --dsn`` process of a fleet."""

    def __init__(
        self,
        name: str,
        root: Path,
        log_path: Path,
        *,
        schema: str,
        gateway: bool,
        lease_seconds: float,
        bandwidth: int | None,
        env: Mapping[str, str],
        tokens: Sequence[str],
    ) -> None:
        self.name = name
        self.gateway = gateway
        self.lease_seconds = lease_seconds
        self.log_path = log_path
        self.application_name = f"{schema}-{name}"
        self.port = 0  # chosen by the system when the process binds (``--port 0``)
        self._log_offset = 0
        dsn = with_application_name(database_url(), self.application_name)
        self._argv = [
            sys.executable,
            "-m",
            "arkvory_sched.demo",
            "serve",
            str(root),
            "--host",
            HOST,
            "--port",
            "0",
            "--dsn",
            dsn,
            "--schema",
            schema,
            "--lease-seconds",
            f"{lease_seconds:g}",
        ]
        if gateway:
            self._argv.append("--gateway")
        if bandwidth is not None:
            self._argv += ["--bandwidth", str(bandwidth)]
        for token in tokens:
            self._argv += ["--token", token]
        self._env = {k: v for k, v in os.environ.items() if not k.startswith("ARKVORY_")}
        self._env.update(FLEET_ENV)
        self._env.update(env)
        self._env["PYTHONUNBUFFERED"] = "1"
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def __repr__(self) -> str:
        return f"FleetServer({self.name!r}, port={self.port})"

    @property
    def pid(self) -> int:
        assert self._process is not None, f"{self.name} is not running"
        return self._process.pid

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def url(self, name: str) -> str:
        return f"{self.base_url}/files/{name}"

    def launch(self) -> None:
        """Start the process and return at once (:meth:`wait_started` waits for it)."""
        assert self._process is None, f"{self.name} already runs"
        self._log = self.log_path.open("ab")
        self._log_offset = self._log.tell()
        self._process = subprocess.Popen(
            self._argv,
            env=self._env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def wait_started(self) -> None:
        process = self._process
        assert process is not None
        deadline = time.monotonic() + STARTUP_SECONDS
        try:
            self.port = wait_listening(
                self.log_path, self._log_offset, deadline, alive=lambda: process.poll() is None
            )
            wait_ready(f"{self.base_url}/readyz", deadline, alive=lambda: process.poll() is None)
        except (RuntimeError, TimeoutError) as error:
            self.stop()
            raise RuntimeError(f"{self.name}: {error}\n--- log ---\n{self.log_tail()}") from None

    def kill(self) -> float:
        """SIGKILL; returns the wall-clock time of the signal (after the process is gone)."""
        assert self._process is not None
        killed_at = time.time()
        self._process.send_signal(signal.SIGKILL)
        self._process.wait(10.0)
        return killed_at

    def pause(self) -> float:
        """SIGSTOP; returns the wall-clock time of the signal."""
        assert self._process is not None
        paused_at = time.time()
        self._process.send_signal(signal.SIGSTOP)
        return paused_at

    def resume(self) -> float:
        """SIGCONT; returns the wall-clock time of the signal."""
        assert self._process is not None
        resumed_at = time.time()
        self._process.send_signal(signal.SIGCONT)
        return resumed_at

    def stop(self) -> None:
        """SIGCONT (a stopped process ignores SIGTERM), SIGTERM, and SIGKILL after a
        short grace period."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGCONT)
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(STOP_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10.0)
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])


class Fleet:
    """The processes of one test: one directory, one schema, any number of servers."""

    def __init__(self, root: Path, logs: Path, schema: str) -> None:
        self.root = root
        self.logs = logs
        self.schema = schema
        self.servers: list[FleetServer] = []
        self.digests: dict[str, str] = {}

    def write_file(self, name: str, size: int) -> str:
        """A file of ``size`` deterministic bytes under the served root; its SHA-256."""
        digest = write_pattern_file(self.root / name, size, seed=name)
        self.digests[name] = digest
        return digest

    def start(
        self,
        name: str,
        *,
        gateway: bool = True,
        lease_seconds: float = 10.0,
        bandwidth: int | None = None,
        env: Mapping[str, str] | None = None,
        tokens: Sequence[str] = (),
        wait: bool = True,
    ) -> FleetServer:
        server = FleetServer(
            name,
            self.root,
            self.logs / f"{name}.log",
            schema=self.schema,
            gateway=gateway,
            lease_seconds=lease_seconds,
            bandwidth=bandwidth,
            env=env or {},
            tokens=tokens,
        )
        self.servers.append(server)
        server.launch()
        if wait:
            server.wait_started()
        return server

    def stop_all(self) -> None:
        for server in self.servers:
            server.stop()

    def logs_of(self, *servers: FleetServer) -> str:
        chosen = servers or tuple(self.servers)
        return "\n".join(f"--- {s.name} ---\n{s.log_tail()}" for s in chosen)


_FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Remember a failed test, so that its fleet prints the servers' logs."""
    report = yield
    if report.failed:
        item.stash[_FAILED] = True
    return report


@pytest.fixture
def fleet(fleet_schema: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Fleet]:
    """The fleet of a test; every process is stopped (or killed) at teardown, and the
    end of each server's log is printed when the test failed."""
    root = tmp_path / "served"
    root.mkdir()
    logs = tmp_path / "logs"
    logs.mkdir()
    group = Fleet(root, logs, fleet_schema)
    try:
        yield group
    finally:
        group.stop_all()
        if request.node.stash.get(_FAILED, False):
            print(group.logs_of())


# --- looking at the slot table ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SlotRow:
    slot_no: int
    session_key: bytes | None
    token: int
    holder: str | None
    expires_at: float | None  # epoch seconds on the database clock


SLOT_ROWS: Final = """
SELECT slot_no, session_key, lease_token, holder_node,
       extract(epoch FROM lease_expires_at)::float8 AS expires_at,
       extract(epoch FROM clock_timestamp())::float8 AS db_now
FROM download_slot ORDER BY slot_no
"""


async def slot_rows(connection: asyncpg.Connection) -> tuple[float, list[SlotRow]]:
    """The database's clock and every slot row, read in one statement."""
    records = await connection.fetch(SLOT_ROWS, timeout=SAMPLE_TIMEOUT_SECONDS)
    db_now = records[0]["db_now"] if records else time.time()
    rows = [
        SlotRow(
            r["slot_no"],
            None if r["session_key"] is None else bytes(r["session_key"]),
            r["lease_token"],
            r["holder_node"],
            r["expires_at"],
        )
        for r in records
    ]
    return db_now, rows


class SlotSampler:
    """Reads ``download_slot`` every 50 ms and checks the invariants of the leases.

    Per sample: at most ``limit`` slots hold a session (R-PG-2), and no session holds
    two slots. Across samples: a fencing token is handed out once, so it always names
    the same session on the same slot — seeing one token with two sessions would be a
    double grant. The sampler runs on a connection of its own and reconnects after a
    lost connection (a PostgreSQL restart), counting the gap. Whatever a read raises
    is counted by type and the read retried, so the sampler outlives any misbehaviour of
    the database; a failure of the sampler itself is kept and raised in the test.
    """

    def __init__(self, schema: str, limit: int, interval: float = SAMPLE_SECONDS) -> None:
        self.schema = schema
        self.limit = limit
        self.interval = interval
        self.samples = 0
        self.max_active = 0
        self.active = -1  # in the last sample (-1: none yet)
        self.sampled_at = 0.0  # time.monotonic() of the last sample
        self.errors: Counter[str] = Counter()  # failed reads by exception type
        self.failure: BaseException | None = None  # what stopped the sampler, if anything
        self.reconnects = 0
        self.longest_gap = 0.0
        self.violations: list[str] = []
        self.grants: dict[int, tuple[int, bytes]] = {}  # token -> (slot, session)
        self.last_held: dict[bytes, float] = {}  # session -> last sample holding a slot

    def check(self, rows: Sequence[SlotRow]) -> None:
        held = [row for row in rows if row.session_key is not None]
        active = len(held)
        self.max_active = max(self.max_active, active)
        self.active = active
        now = self.sampled_at = time.monotonic()
        if active > self.limit:
            self.violations.append(f"{active} active slots, limit {self.limit}")
        keys = Counter(row.session_key for row in held)
        for key, count in keys.items():
            if count > 1:
                self.violations.append(f"session {key!r} holds {count} slots")
        for row in held:
            assert row.session_key is not None
            self.last_held[row.session_key] = now
            seen = self.grants.setdefault(row.token, (row.slot_no, row.session_key))
            if seen != (row.slot_no, row.session_key):
                self.violations.append(
                    f"token {row.token} named slot {seen[0]} / {seen[1]!r} and later "
                    f"slot {row.slot_no} / {row.session_key!r}"
                )

    async def run(self, stop: asyncio.Event) -> None:
        connection: asyncpg.Connection | None = None
        last_sample = next_at = time.monotonic()
        try:
            while not stop.is_set():
                try:
                    if connection is None or connection.is_closed():
                        connection = await observe(self.schema)
                        if self.samples:
                            self.reconnects += 1
                    _, rows = await slot_rows(connection)
                except Exception as error:  # any failed read is counted and retried
                    self.errors[type(error).__name__] += 1
                    if connection is not None:
                        connection.terminate()
                        connection = None
                    await asyncio.sleep(self.interval)
                    continue
                now = time.monotonic()
                self.longest_gap = max(self.longest_gap, now - last_sample)
                last_sample = now
                self.samples += 1
                self.check(rows)
                next_at = max(now, next_at + self.interval)
                with suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), next_at - now)
        finally:
            if connection is not None:
                connection.terminate()

    @contextmanager
    def running(self) -> Iterator[SlotSampler]:
        """Sample in a thread with an event loop of its own while the block runs.

        A thread of its own keeps the 50 ms pace even while the test's event loop is
        busy with hundreds of clients hashing their bytes.
        """
        loop = asyncio.new_event_loop()
        stop = asyncio.Event()  # bound to ``loop`` when first awaited, in the thread

        async def main() -> None:
            try:
                await self.run(stop)
            except BaseException as error:
                self.failure = error
                raise

        thread = threading.Thread(
            target=loop.run_until_complete, args=(main(),), name="slot-sampler", daemon=True
        )
        thread.start()
        try:
            yield self
        finally:
            loop.call_soon_threadsafe(stop.set)
            thread.join(10.0)
            loop.close()
        if self.failure is not None:
            raise AssertionError("the slot sampler stopped") from self.failure

    def wait_until_empty(self, timeout: float) -> float:
        """Wait for a sample taken after this call that shows no active slot.

        Returns the seconds waited. A stale reading never passes: the sample must be
        newer than the call, and a failure names the last reading, its age and the read
        errors, so a sampler that stopped is told apart from slots that stayed held.
        """
        began = time.monotonic()
        deadline = began + timeout
        while not (self.sampled_at > began and self.active == 0):
            if self.failure is not None:
                raise AssertionError("the slot sampler stopped") from self.failure
            now = time.monotonic()
            if now >= deadline:
                pytest.fail(
                    f"slots still held after {timeout:g} s: {self.active} active in the last "
                    f"sample, taken {now - self.sampled_at:.2f} s ago; read errors "
                    f"{dict(self.errors) or 0}"
                )
            time.sleep(self.interval)
        return time.monotonic() - began


# --- clients ------------------------------------------------------------------------------


@dataclass
class Traffic:
    """What all clients of a test saw together."""

    statuses: Counter[int] = field(default_factory=Counter)
    reasons: Counter[str] = field(default_factory=Counter)
    transport_errors: Counter[str] = field(default_factory=Counter)
    streaming: set[str] = field(default_factory=set)
    max_streaming: int = 0
    requests: int = 0

    def start_streaming(self, download_id: str) -> None:
        self.streaming.add(download_id)
        self.max_streaming = max(self.max_streaming, len(self.streaming))

    def stop_streaming(self, download_id: str) -> None:
        self.streaming.discard(download_id)


@dataclass
class Download:
    """One client's download of one file, with what it saw on the way."""

    download_id: str
    name: str
    size: int
    offset: int = 0
    ticket: str | None = None
    requests: int = 0
    positions: list[int] = field(default_factory=list)  # the current wait's positions
    position_answers: int = 0
    backwards: list[tuple[int, int]] = field(default_factory=list)  # (before, after)
    max_position: int = 0
    placed_at_once: bool = False  # its first answer, as a newcomer, named a place
    started: float | None = None
    first_grant: float | None = None
    finished: float | None = None
    digest: Any = field(default_factory=hashlib.sha256)

    @property
    def key(self) -> bytes:
        return key_of(self.name, self.download_id)

    @property
    def max_backwards_jump(self) -> int:
        return max((after - before for before, after in self.backwards), default=0)

    def hexdigest(self) -> str:
        return str(self.digest.hexdigest())


def http_client(timeout: float = 30.0) -> httpx.AsyncClient:
    """One connection pool for all clients of a test.

    Idle connections are dropped after 2 s, well before uvicorn closes them (5 s): a
    request sent on a connection the server is closing at that very moment fails with
    a transport error that says nothing about the scheduler.
    """
    limits = httpx.Limits(
        max_connections=1000, max_keepalive_connections=1000, keepalive_expiry=2.0
    )
    return httpx.AsyncClient(timeout=httpx.Timeout(timeout, connect=5.0), limits=limits)


async def fetch(
    download: Download,
    http: httpx.AsyncClient,
    servers: Sequence[FleetServer],
    traffic: Traffic,
    *,
    deadline: float,
    max_sleep: float = 1.0,
    headers: Mapping[str, str] | None = None,
) -> None:
    """Download the whole file in 8 MiB ranges, each from a server picked at random.

    Behaves like the SDK: sends its ``Arkvory-Download-Id`` and the last ticket, waits
    ``Retry-After`` (capped at ``max_sleep``) after a ``503``, resumes at the first byte
    it does not have after a broken connection. Unexpected statuses are counted, not
    raised, so that a test can report all of them; it retries them after a short pause.
    """
    if download.started is None:
        download.started = time.monotonic()
    while download.offset < download.size:
        if time.monotonic() >= deadline:
            raise AssertionError(
                f"{download.download_id}: only {download.offset} of {download.size} bytes "
                f"before the deadline"
            )
        server = random.choice(servers)
        last = min(download.offset + RANGE_BYTES, download.size) - 1
        request_headers = {
            **(headers or {}),
            "Arkvory-Download-Id": download.download_id,
            "Range": f"bytes={download.offset}-{last}",
        }
        if download.ticket is not None:
            request_headers["Arkvory-Queue-Ticket"] = download.ticket
        download.requests += 1
        traffic.requests += 1
        pause = 0.0
        receiving = False
        try:
            async with http.stream(
                "GET", server.url(download.name), headers=request_headers
            ) as response:
                status = response.status_code
                traffic.statuses[status] += 1
                download.ticket = response.headers.get("arkvory-queue-ticket") or download.ticket
                if status == 206:
                    receiving = True
                    await _receive(download, response, traffic)
                    continue
                body = await response.aread()
                if status == 503:
                    newcomer = "Arkvory-Queue-Ticket" not in request_headers
                    pause = _queued(download, response, body, traffic, newcomer=newcomer)
                else:
                    traffic.reasons[f"{status}: {body[:120]!r}"] += 1
                    pause = 0.5
        except httpx.TransportError as error:
            where = "in a body" if receiving else "before an answer"
            traffic.transport_errors[f"{type(error).__name__} {where}"] += 1
            pause = 0.2
        await asyncio.sleep(min(max_sleep, pause) * random.uniform(0.8, 1.0))
    download.finished = time.monotonic()


async def _receive(download: Download, response: httpx.Response, traffic: Traffic) -> None:
    content_range = response.headers.get("content-range", "")
    expected = f"bytes {download.offset}-"
    assert content_range.startswith(expected), f"{content_range!r}, wanted {expected}…"
    if download.first_grant is None:
        download.first_grant = time.monotonic()
    download.positions.clear()
    traffic.start_streaming(download.download_id)
    try:
        async for chunk in response.aiter_raw():
            download.digest.update(chunk)
            download.offset += len(chunk)
    finally:
        traffic.stop_streaming(download.download_id)


def _queued(
    download: Download,
    response: httpx.Response,
    body: bytes,
    traffic: Traffic,
    *,
    newcomer: bool = False,
) -> float:
    """Record a ``503`` answer; return how long it asks the client to wait.
    ``newcomer``: the request brought no ticket (the download's first)."""
    try:
        document = json.loads(body)
    except ValueError:
        document = {}
    reason = str(document.get("reason", "?"))
    if reason == "busy":
        reason = f"busy/{document.get('busyReason', '?')}"
    traffic.reasons[reason] += 1
    position = response.headers.get("arkvory-queue-position")
    if position is not None:
        value = int(position)
        download.placed_at_once = download.placed_at_once or newcomer
        download.position_answers += 1
        download.max_position = max(download.max_position, value)
        if download.positions and value > download.positions[-1]:
            download.backwards.append((download.positions[-1], value))
        download.positions.append(value)
    retry_after = response.headers.get("retry-after")
    return float(retry_after) if retry_after and retry_after.isdigit() else 1.0


def assert_no_dropped_connections(traffic: Traffic) -> None:
    """No transport error but the rare reset before any answer.

    A connection reset before any answer (seen about once in 15,000 requests over
    loopback, with nothing in the servers' logs; once in 600 requests around a
    PostgreSQL restart) is retried as every HTTP client retries it; more than a handful
    would mean the servers drop connections. A transport error in the middle of a body
    is never expected.
    """
    errors = traffic.transport_errors
    before_answer = sum(n for kind, n in errors.items() if "before" in kind)
    assert before_answer <= max(1, traffic.requests // 1000), errors
    assert before_answer == sum(errors.values()), errors


# --- figures ------------------------------------------------------------------------------


def held_after_last_byte(sampler: SlotSampler, downloads: Sequence[Download]) -> list[float]:
    """Per download: how long its session still held a slot after the client had the
    last byte (negative: the slot was free before the client finished reading).

    Only downloads the sampler saw holding a slot count: one whose session held it only
    between two samples (50 ms apart) has no time to compare with.
    """
    return [
        sampler.last_held[d.key] - d.finished
        for d in downloads
        if d.finished is not None and d.key in sampler.last_held
    ]


def spread(values: Sequence[float]) -> str:
    """``min / median / max`` of ``values`` in seconds, for the printed figures."""
    if not values:
        return "n/a"
    return (
        f"min {min(values):.2f} s / median {statistics.median(values):.2f} s / "
        f"max {max(values):.2f} s"
    )


def report(title: str, figures: Mapping[str, object]) -> None:
    """Print the figures of a test (visible with ``pytest -s``)."""
    print(f"\n[fleet] {title}")
    for key, value in figures.items():
        print(f"[fleet]   {key}: {value}")


# --- fleet state --------------------------------------------------------------------------


async def queue_counters(schema: str) -> dict[str, int]:
    """The fleet's totals of sessions completed, reaped, released idle and no-shows."""
    connection = await observe(schema)
    try:
        row = await connection.fetchrow(
            "SELECT completed_total, reaped_total, idle_releases_total, no_shows_total "
            "FROM queue_state"
        )
        return {key: int(value) for key, value in dict(row).items()}
    finally:
        await connection.close()


ANONYMOUS: Final = "anonymous-link"


def key_of(name: str, download_id: str, principal: str = ANONYMOUS) -> bytes:
    """The session key the servers give ``download_id``'s download of file ``name``."""
    return bytes(session_key(principal, name, download_id, HOST))


async def node_of(connection: asyncpg.Connection, server: FleetServer) -> str:
    """The ``fleet_node`` id of ``server`` (``host:pid:random``), once it has joined."""
    deadline = time.monotonic() + 10.0
    while True:
        node = await connection.fetchval(
            "SELECT node_id FROM fleet_node WHERE split_part(node_id, ':', 2) = $1",
            str(server.pid),
        )
        if node is not None:
            return str(node)
        assert time.monotonic() < deadline, f"{server.name} never joined the fleet"
        await asyncio.sleep(SAMPLE_SECONDS)


async def wait_for_leader(connection: asyncpg.Connection, node: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        leader = await connection.fetchval(
            "SELECT node_id FROM queue_leader WHERE expires_at > now()"
        )
        if leader == node:
            return
        assert time.monotonic() < deadline, f"{node} does not lead (leader: {leader})"
        await asyncio.sleep(SAMPLE_SECONDS)


async def open_range(
    http: httpx.AsyncClient,
    server: FleetServer,
    name: str,
    download_id: str,
    byte_range: str,
    *,
    headers: Mapping[str, str] | None = None,
) -> httpx.Response:
    """Send one range request and return the response with its body still unread."""
    request = http.build_request(
        "GET",
        server.url(name),
        headers={**(headers or {}), "Arkvory-Download-Id": download_id, "Range": byte_range},
    )
    return await http.send(request, stream=True)
