"""The gate's real processes: demo servers, HAProxy, the link, and what is sampled from them.

Servers run this tree's code (``arkvory-demo serve`` as :mod:`benchmarks._gate_server`,
with the tree on ``PYTHONPATH``), each a single uvicorn process, so ``/proc/<pid>/stat``
holds all of its CPU. HAProxy is Debian's binary with a generated configuration: round-robin per
request, no affinity, health checks on ``/readyz`` every 250 ms (down after 2 misses),
so a killed server is out of rotation within about half a second; ``X-Forwarded-For``
carries each client's address, which keys a download without an id (R-SESS-2). The
common practice adds ``maxconn`` per server and ``timeout queue 20s``: HAProxy's own
per-request queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from benchmarks._gate_link import LINK_VARIABLE, UNTOLD_VARIABLE

__all__ = ["DSN", "TOKEN", "Fleet", "Sampler", "cpu_seconds"]

DSN = os.environ.get("ARKVORY_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
TOKEN = "gate-token"
_ROOT = Path(__file__).resolve().parent.parent
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU of one process so far (fields 14 and 15 of /proc/pid/stat)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


def _haproxy_config(port: int, servers: list[int], maxconn: int | None) -> str:
    limit = f" maxconn {maxconn}" if maxconn is not None else ""
    lines = [
        "global",
        "  maxconn 8192",
        "defaults",
        "  mode http",
        "  timeout connect 2s",
        "  timeout client 120s",
        "  timeout server 120s",
        "  timeout queue 20s",
        "  timeout check 1s",
        "  option forwardfor",  # uvicorn takes the client's address from 127.0.0.1's header
        "  retries 2",
        "  option redispatch",
        "frontend gate",
        f"  bind 127.0.0.1:{port}",
        "  default_backend fleet",
        "backend fleet",
        "  balance roundrobin",
        "  option httpchk GET /readyz",
        "  default-server inter 250ms fall 2 rise 2",
    ]
    lines += [f"  server s{i} 127.0.0.1:{p} check{limit}" for i, p in enumerate(servers)]
    return "\n".join(lines) + "\n"


@dataclass
class Fleet:
    """The processes of one configuration; :meth:`stop` ends each one it started."""

    work: Path
    port_base: int
    servers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    others: list[subprocess.Popen[bytes]] = field(default_factory=list)
    clients: list[subprocess.Popen[bytes]] = field(default_factory=list)
    server_ports: list[int] = field(default_factory=list)
    cpu: dict[int, float] = field(default_factory=dict)

    def spawn(
        self, argv: list[str], name: str, env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        """Start ``argv`` (Python's arguments, or a program's whole command) on this tree."""
        log = open(self.work / f"{name}.log", "wb")  # noqa: SIM115 - lives with the process
        environment = {**os.environ, "PYTHONPATH": f"{_ROOT / 'src'}:{_ROOT}", **(env or {})}
        command = argv if argv[0].startswith("/") else [sys.executable, *argv]
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=environment)

    def start_servers(
        self,
        count: int,
        files: Path,
        rate: int,
        env: dict[str, str],
        schema: str | None,
        *,
        told: bool = True,
    ) -> None:
        """``count`` demo servers; with a schema, the first a writer and the rest gateways.

        ``told``: ``--bandwidth`` gives the scheduler the link's rate; otherwise every
        response still goes through the link, and the scheduler measures what it can."""
        for index in range(count):
            port = self.port_base + 1 + index
            argv = ["-m", "benchmarks._gate_server", "serve", str(files), "--port", str(port)]
            argv += ["--token", f"{TOKEN}=ci-fleet:service"]
            argv += ["--bandwidth", str(rate)] if told else []
            if schema is not None:
                argv += ["--dsn", DSN, "--schema", schema] + (["--gateway"] if index else [])
            env = {**env, LINK_VARIABLE: str(self.work / "link.socket")}
            if not told:
                env[UNTOLD_VARIABLE] = str(rate)
            self.servers.append(self.spawn(argv, f"server-{port}", env))
            self.server_ports.append(port)

    def start_haproxy(self, maxconn: int | None) -> int:
        port = self.port_base + 10
        config = self.work / "haproxy.cfg"
        config.write_text(_haproxy_config(port, self.server_ports, maxconn))
        self.others.append(self.spawn(["/usr/sbin/haproxy", "-db", "-f", str(config)], "haproxy"))
        return port

    def start_link(self, rate: int) -> Path:
        """The link process, before the servers that connect to it; where it will report."""
        out, socket = self.work / "link.json", self.work / "link.socket"
        self.others.append(
            self.spawn(["-m", "benchmarks._gate_link", str(socket), str(rate), str(out)], "link")
        )
        return out

    async def wait_ready(self, url: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient() as http:
            while True:
                try:
                    if (await http.get(url)).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{url} not ready after {timeout} s; see {self.work}")
                await asyncio.sleep(0.2)

    def kill(self, index: int) -> None:
        """SIGKILL one server, its CPU read first (a dead process has no /proc entry)."""
        process = self.servers[index]
        self.cpu[process.pid] = cpu_seconds(process.pid)
        process.send_signal(signal.SIGKILL)

    def stop(self) -> float:
        """Stop everything started; return the servers' CPU seconds in total."""
        for process in self.servers:
            if process.poll() is None:
                self.cpu[process.pid] = cpu_seconds(process.pid)
        everything = [*self.clients, *self.servers, *self.others]
        for process in everything:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in everything:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        return sum(self.cpu.values())


@dataclass
class Sampler:
    """Every 250 ms: the active sessions (``/readyz``, or the slot rows of the shared
    queue) and, on PostgreSQL, every held slot with its session, fencing token and holder.
    """

    readyz: list[str]
    schema: str | None = None
    active: list[tuple[float, int]] = field(default_factory=list)
    slots: list[tuple[float, list[tuple[int, bytes, int, str]]]] = field(default_factory=list)
    leader: str | None = None
    _connection: Any = None

    async def run(self, stop: asyncio.Event) -> None:
        async with httpx.AsyncClient(timeout=2.0) as http:
            while not stop.is_set():
                if self.schema is not None:
                    await self._sample_database()
                elif self.readyz:
                    total = 0
                    for url in self.readyz:
                        with contextlib.suppress(httpx.HTTPError, ValueError, KeyError):
                            total += int((await http.get(url)).json()["active"])
                    self.active.append((time.time(), total))
                await asyncio.sleep(0.25)
        if self._connection is not None:
            await self._connection.close()

    async def _sample_database(self) -> None:
        """One sample of the slot rows; a lost connection (other tests on this database
        terminate backends) costs a sample and is opened again, never the run."""
        try:
            if self._connection is None or self._connection.is_closed():
                settings = {"search_path": str(self.schema)}
                self._connection = await asyncpg.connect(DSN, server_settings=settings)
            now = time.time()
            rows = await self._connection.fetch(
                "SELECT slot_no, session_key, lease_token, holder_node FROM download_slot"
                " WHERE session_key IS NOT NULL"
            )
            self.leader = await self._connection.fetchval("SELECT node_id FROM queue_leader")
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
            self._connection = None
            return
        held = [(r[0], bytes(r[1]), r[2], r[3]) for r in rows]
        self.slots.append((now, held))
        self.active.append((now, len(held)))
