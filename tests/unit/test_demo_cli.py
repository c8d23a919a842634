"""``arkvory-demo``: option parsing, the example directory, and the assembled server.

The server is never started for real: ``uvicorn.Server`` is replaced by a recorder,
so a test proves what would be run (and that bad input stops before it) without
binding a port.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from starlette.types import ASGIApp, Receive, Send

from arkvory_sched import (
    ConfigurationError,
    InMemoryDownloadScheduler,
    PrincipalKind,
    SchedulerSettings,
    SettingsKeeper,
)
from arkvory_sched.demo import _cli as demo_cli
from arkvory_sched.demo import build_app, create_example, load_ticket_key, main
from arkvory_sched.demo._app import KEY_FILE_NAME
from arkvory_sched.demo._auth import ANONYMOUS_LINK, parse_token, parse_tokens, principal_for
from arkvory_sched.demo._cli import build_parser, example_files
from arkvory_sched.postgres import PostgresScheduler
from arkvory_sched.sqlite import SETTINGS_FILE_NAME, SqliteSettingsStore

MIB = 1024 * 1024
Message = MutableMapping[str, Any]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings come from ARKVORY_* variables: start every test from the defaults."""
    for name in list(os.environ):
        if name.startswith("ARKVORY_"):
            monkeypatch.delenv(name)


class RecordingServer:
    """Stands in for ``uvicorn.Server``: records the config instead of serving."""

    instances: list[RecordingServer] = []  # noqa: RUF012 - test recorder

    def __init__(self, config: Any, scheduler: Any = None) -> None:
        self.config = config
        self.scheduler = scheduler
        self.started = False
        RecordingServer.instances.append(self)

    def run(self) -> None:
        self.started = True


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[RecordingServer]]:
    RecordingServer.instances = []
    monkeypatch.setattr(demo_cli, "DrainingServer", RecordingServer)
    yield RecordingServer


# --- tokens -------------------------------------------------------------------------------


def test_parse_token() -> None:
    assert parse_token("abc=alice:person") == ("abc", ("alice", PrincipalKind.PERSON))
    assert parse_token("t0k.en=svc:ci:SERVICE") == ("t0k.en", ("svc:ci", PrincipalKind.SERVICE))
    assert parse_token("a=b=c:link") == ("a", ("b=c", PrincipalKind.LINK))


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("abc", "TOKEN=PRINCIPAL:KIND"),
        ("=alice:person", "TOKEN=PRINCIPAL:KIND"),
        ("abc=alice", "TOKEN=PRINCIPAL:KIND"),
        ("abc=:person", "TOKEN=PRINCIPAL:KIND"),
        ("abc=alice:robot", "unknown principal kind 'robot'"),
        ("abc=alice:", "unknown principal kind"),
        ("a b=alice:person", "may only contain"),
    ],
)
def test_bad_token_values_are_named(value: str, why: str) -> None:
    with pytest.raises(ValueError, match="invalid token") as raised:
        parse_token(value)
    assert repr(value) in str(raised.value)
    assert why in str(raised.value)


def test_a_token_defined_twice_is_an_error() -> None:
    with pytest.raises(ValueError, match="already defined"):
        parse_tokens(["t=alice:person", "t=bob:person"])
    assert parse_tokens(["t=alice:person", "u=ci:service"]) == {
        "t": ("alice", PrincipalKind.PERSON),
        "u": ("ci", PrincipalKind.SERVICE),
    }


def scope_with(*headers: tuple[bytes, bytes]) -> dict[str, Any]:
    return {"type": "http", "method": "GET", "path": "/", "headers": list(headers)}


def test_principal_for() -> None:
    tokens = parse_tokens(["secret=alice:person"])
    assert principal_for(scope_with(), tokens) == ANONYMOUS_LINK
    assert ANONYMOUS_LINK == ("anonymous-link", PrincipalKind.LINK)
    assert principal_for(scope_with((b"authorization", b"Bearer secret")), tokens) == (
        "alice",
        PrincipalKind.PERSON,
    )
    assert principal_for(scope_with((b"Authorization", b"bearer  secret ")), tokens) == (
        "alice",
        PrincipalKind.PERSON,
    )
    assert principal_for(scope_with((b"authorization", b"Bearer other")), tokens) is None
    assert principal_for(scope_with((b"authorization", b"Basic c2VjcmV0")), tokens) is None
    twice = scope_with((b"authorization", b"Bearer secret"), (b"authorization", b"Bearer x"))
    assert principal_for(twice, tokens) is None


def test_serve_rejects_a_bad_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], recorder: type[RecordingServer]
) -> None:
    assert main(["serve", str(tmp_path), "--token", "abc=alice:robot"]) == 2
    err = capsys.readouterr().err
    assert "--token" in err
    assert "'abc=alice:robot'" in err
    assert recorder.instances == []


# --- example ------------------------------------------------------------------------------


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_example_creates_files_idempotently(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "example"
    assert main(["example", str(directory), "--files", "2", "--size", "1MiB"]) == 0
    out = capsys.readouterr().out
    assert "created" in out
    expected = {spec.name: spec.size for spec in example_files(2, MIB)}
    for name, size in expected.items():
        assert (directory / name).stat().st_size == size
    assert (directory / "README.txt").is_file()
    assert (directory / "bundle.zip").read_bytes().startswith(b"PK\x03\x04")
    assert all(size < 16 * MIB for size in expected.values())
    files = sorted(p for p in directory.rglob("*") if p.is_file())
    assert not [p for p in files if p.name.startswith(".")]  # no temporary leftovers
    before = {p: (p.stat().st_mtime_ns, digest(p)) for p in files}

    assert main(["example", str(directory), "--files", "2", "--size", "1MiB"]) == 0
    out = capsys.readouterr().out
    assert "created" not in out
    assert {p: (p.stat().st_mtime_ns, digest(p)) for p in files} == before


def test_example_contents_are_deterministic(tmp_path: Path) -> None:
    first = create_example(tmp_path / "a", large_files=1, size=3 * MIB + 5)
    second = create_example(tmp_path / "b", large_files=1, size=3 * MIB + 5)
    assert all(written for _, written in first)
    for (left, _), (right, _) in zip(first, second, strict=True):
        assert left.name == right.name
        assert digest(left) == digest(right)
    again = create_example(tmp_path / "a", large_files=1, size=3 * MIB + 5)
    assert not any(written for _, written in again)


def test_example_rewrites_a_file_of_the_wrong_size(tmp_path: Path) -> None:
    create_example(tmp_path, large_files=1, size=MIB)
    victim = tmp_path / "large" / "image-1.bin"
    victim.write_bytes(b"truncated")
    results = dict(create_example(tmp_path, large_files=1, size=MIB))
    assert results[victim] is True
    assert victim.stat().st_size == MIB


def test_example_default_sizes() -> None:
    sizes = {spec.name: spec.size for spec in example_files()}
    assert sizes["large/image-1.bin"] == 48 * MIB
    assert sizes["large/image-2.bin"] == 64 * MIB
    small = [size for name, size in sizes.items() if name.startswith("small/")]
    assert small
    assert all(size < 16 * MIB for size in small)


def test_example_refuses_a_file_as_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    assert main(["example", str(target)]) == 2
    assert "not a directory" in capsys.readouterr().err


# --- serve --------------------------------------------------------------------------------


def test_serve_nonexistent_directory_exits_2(
    capsys: pytest.CaptureFixture[str], recorder: type[RecordingServer]
) -> None:
    assert main(["serve", "/nonexistent"]) == 2
    err = capsys.readouterr().err
    assert "/nonexistent" in err
    assert "not a directory" in err
    assert recorder.instances == []


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("ARKVORY_MAX_DOWNLOADS", "lots"),
        ("ARKVORY_DOWNLOAD_STRATEGY", "random"),
        ("ARKVORY_DOWNLOAD_IDLE_SECONDS", "-5"),
        ("ARKVORY_TICKET_KEY", "not-hex"),
        ("ARKVORY_TICKET_KEY", "abcd"),
    ],
)
def test_bad_environment_exits_2_naming_the_variable(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    recorder: type[RecordingServer],
    variable: str,
    value: str,
) -> None:
    monkeypatch.setenv(variable, value)
    assert main(["serve", str(tmp_path)]) == 2
    assert variable in capsys.readouterr().err
    assert recorder.instances == []


@pytest.mark.parametrize(
    "argv",
    [
        ["serve", ".", "--bandwidth", "40Mb"],
        ["serve", ".", "--bandwidth", "0"],
        ["serve", ".", "--bandwidth", "fast"],
        ["serve", ".", "--port", "70000"],
        ["example", ".", "--files", "-1"],
        ["example", ".", "--size", "0"],
        ["launch"],
        [],
    ],
)
def test_usage_errors_exit_2(
    argv: list[str], capsys: pytest.CaptureFixture[str], recorder: type[RecordingServer]
) -> None:
    assert main(argv) == 2
    assert "usage:" in capsys.readouterr().err
    assert recorder.instances == []


def test_gateway_without_a_shared_queue_refuses_to_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], recorder: type[RecordingServer]
) -> None:
    # R-PG-4: a gateway with a per-process queue behind a load balancer loses positions.
    assert main(["serve", str(tmp_path), "--gateway"]) == 2
    err = capsys.readouterr().err
    assert "--gateway needs the shared queue" in err
    assert "--dsn" in err
    assert "ARKVORY_DATABASE_URL" in err
    assert recorder.instances == []
    assert not (tmp_path / KEY_FILE_NAME).exists()


def test_gateway_takes_its_shared_queue_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recorder: type[RecordingServer]
) -> None:
    monkeypatch.setenv("ARKVORY_DATABASE_URL", "postgresql://nobody@127.0.0.1:1/none")
    assert main(["serve", str(tmp_path), "--gateway"]) == 0
    (server,) = recorder.instances
    assert isinstance(server.scheduler, PostgresScheduler)


def test_build_app_refuses_a_gateway_without_a_database(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="database_url"):
        build_app(tmp_path, {}, writer=False)


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "serve" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("text", "expected"),
    [("40MB", 40_000_000), ("40MiB", 40 * MIB), ("125MB/s", 125_000_000), ("1000", 1000)],
)
def test_bandwidth_accepts_units(text: str, expected: int) -> None:
    args = build_parser().parse_args(["serve", ".", "--bandwidth", text])
    assert args.bandwidth == expected


def test_serve_runs_uvicorn_with_the_app(tmp_path: Path, recorder: type[RecordingServer]) -> None:
    argv = ["serve", str(tmp_path), "--host", "0.0.0.0", "--port", "0", "--bandwidth", "1MB"]
    assert main([*argv, "--token", "t=alice:person"]) == 0
    (server,) = recorder.instances
    assert server.started
    config = server.config
    assert (config.host, config.port, config.lifespan) == ("0.0.0.0", 0, "on")
    assert callable(config.app)
    assert server.scheduler is not None  # closed at the shutdown signal (R-RES-4)
    settings = tmp_path / SETTINGS_FILE_NAME  # keeps the ticket key
    assert settings.is_file()
    assert stat.S_IMODE(settings.stat().st_mode) == 0o600
    assert not (tmp_path / KEY_FILE_NAME).exists(), "no separate key file any more"


def test_serve_reports_a_server_that_did_not_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recorder: type[RecordingServer]
) -> None:
    monkeypatch.setattr(RecordingServer, "run", lambda self: None)
    assert main(["serve", str(tmp_path)]) == 1


# --- ticket key ---------------------------------------------------------------------------


def test_ticket_key_is_created_once_in_the_settings_file(tmp_path: Path) -> None:
    key = load_ticket_key(tmp_path, {})
    assert len(key) == 32
    path = tmp_path / SETTINGS_FILE_NAME
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_ticket_key(tmp_path, {}) == key  # survives a restart


def test_the_ticket_key_of_an_earlier_version_stays_valid(tmp_path: Path) -> None:
    old_key = bytes(range(32))
    (tmp_path / KEY_FILE_NAME).write_text(old_key.hex() + "\n")
    assert load_ticket_key(tmp_path, {}) == old_key
    assert load_ticket_key(tmp_path, {}) == old_key


def test_the_settings_file_moves_with_its_variable(tmp_path: Path) -> None:
    elsewhere = tmp_path / "state" / "settings.sqlite3"
    key = load_ticket_key(tmp_path / "served", {"ARKVORY_SETTINGS_FILE": str(elsewhere)})
    assert elsewhere.is_file()
    assert load_ticket_key(tmp_path / "other", {"ARKVORY_SETTINGS_FILE": str(elsewhere)}) == key


def test_ticket_key_from_the_environment(tmp_path: Path) -> None:
    key = bytes(range(32))
    assert load_ticket_key(tmp_path, {"ARKVORY_TICKET_KEY": key.hex()}) == key
    assert not (tmp_path / KEY_FILE_NAME).exists()


def test_corrupt_key_file_is_a_configuration_error(tmp_path: Path) -> None:
    (tmp_path / KEY_FILE_NAME).write_text("zz\n")
    with pytest.raises(ConfigurationError, match="key file"):
        load_ticket_key(tmp_path, {})


# --- the assembled app --------------------------------------------------------------------


@pytest.fixture
def served(tmp_path: Path) -> Path:
    (tmp_path / "small.txt").write_text("small object\n")
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "big.bin").write_bytes(bytes(4096))
    return tmp_path


@pytest.mark.anyio
async def test_app_serves_files_through_the_scheduler(served: Path) -> None:
    scheduler = InMemoryDownloadScheduler(ticket_keys=[bytes(32)])
    app = build_app(served, parse_tokens(["t=alice:person"]), scheduler=scheduler)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://demo") as http:
        response = await http.get("/files/small.txt")
        assert response.status_code == 200
        assert response.text == "small object\n"
        assert response.headers["arkvory-download-class"] == "release"  # a link
        person = await http.get(
            "/files/dir/big.bin",
            headers={"Authorization": "Bearer t", "Range": "bytes=0-9"},
        )
        assert person.status_code == 206
        assert person.headers["arkvory-download-class"] == "interactive"
        denied = await http.get("/files/small.txt", headers={"Authorization": "Bearer x"})
        assert denied.status_code == 401
        assert (await http.get("/files/missing")).status_code == 404
        assert (await http.get(f"/files/{KEY_FILE_NAME}")).status_code == 404
        assert (await http.get(f"/files/{SETTINGS_FILE_NAME}")).status_code == 404

        index = await http.get("/")
        assert index.status_code == 200
        assert 'href="/files/dir/big.bin"' in index.text
        assert KEY_FILE_NAME not in index.text

        ready = await http.get("/readyz")
        assert ready.status_code == 200
        assert ready.json()["status"] == "ok"
        metrics = await http.get("/metrics")
        assert metrics.status_code == 200
    stats = await scheduler.stats()
    assert (stats.active, stats.request_active) == (0, 0)


async def run_app(app: ASGIApp, scope: Message, receive: Receive, send: Send) -> None:
    await app(scope, receive, send)


@pytest.mark.anyio
async def test_app_lifespan_ticks_and_closes_the_scheduler(served: Path) -> None:
    scheduler = InMemoryDownloadScheduler(ticket_keys=[bytes(32)])
    app = build_app(served, {}, scheduler=scheduler)
    to_app, app_inbox = anyio.create_memory_object_stream[Message](4)
    app_outbox, from_app = anyio.create_memory_object_stream[Message](4)

    async def receive() -> Message:
        return await app_inbox.receive()

    async def send(message: Message) -> None:
        await app_outbox.send(message)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tasks, to_app, app_inbox, app_outbox, from_app:
            scope: Message = {"type": "lifespan", "asgi": {"version": "3.0"}}
            tasks.start_soon(run_app, app, scope, receive, send)
            await to_app.send({"type": "lifespan.startup"})
            assert (await from_app.receive())["type"] == "lifespan.startup.complete"
            while (await scheduler.stats()).last_tick_seconds == 0:
                await anyio.sleep(0.01)  # the tick loop runs
            assert not (await scheduler.stats()).closed
            await to_app.send({"type": "lifespan.shutdown"})
            assert (await from_app.receive())["type"] == "lifespan.shutdown.complete"
    assert (await scheduler.stats()).closed


@pytest.mark.anyio
async def test_app_applies_the_stored_settings_before_it_serves(
    served: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R-SET-3 in the demo: the record saved in the settings file (by an earlier run or
    another process) is running when start-up completes; the API finds the store and
    the keeper on ``app.state``."""
    monkeypatch.delenv("ARKVORY_SETTINGS_FILE", raising=False)
    environment = SchedulerSettings(sessions=8)
    earlier = SqliteSettingsStore(served / SETTINGS_FILE_NAME, environment=environment)
    await earlier.compare_and_set({"sessions": 3}, expected_revision=0, updated_by="ops")
    await earlier.close()

    app = build_app(served, {}, scheduler_settings=environment)
    assert isinstance(app.state.settings_store, SqliteSettingsStore)
    assert isinstance(app.state.settings_keeper, SettingsKeeper)
    assert app.state.settings_store.environment == environment
    to_app, app_inbox = anyio.create_memory_object_stream[Message](4)
    app_outbox, from_app = anyio.create_memory_object_stream[Message](4)

    async def receive() -> Message:
        return await app_inbox.receive()

    async def send(message: Message) -> None:
        await app_outbox.send(message)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tasks, to_app, app_inbox, app_outbox, from_app:
            scope: Message = {"type": "lifespan", "asgi": {"version": "3.0"}}
            tasks.start_soon(run_app, app, scope, receive, send)
            await to_app.send({"type": "lifespan.startup"})
            assert (await from_app.receive())["type"] == "lifespan.startup.complete"
            assert app.state.scheduler.settings.sessions == 3
            assert (app.state.settings_keeper.revision, app.state.settings_keeper.updated_by) == (
                1,
                "ops",
            )
            await to_app.send({"type": "lifespan.shutdown"})
            assert (await from_app.receive())["type"] == "lifespan.shutdown.complete"


def test_ctrl_c_after_graceful_shutdown_exits_130(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recorder: type[RecordingServer]
) -> None:
    def interrupted(self: RecordingServer) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(RecordingServer, "run", interrupted)
    assert main(["serve", str(tmp_path)]) == 130


def test_a_server_exiting_at_start_up_exits_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recorder: type[RecordingServer]
) -> None:
    def cannot_bind(self: RecordingServer) -> None:
        raise SystemExit(3)

    monkeypatch.setattr(RecordingServer, "run", cannot_bind)
    assert main(["serve", str(tmp_path)]) == 1
