"""``arkvory-sched migrate``: messages, exit codes, and several processes at once.

Plain (not async) tests: ``main`` runs its own event loop, as it does from the shell.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import tomllib
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from arkvory_sched.postgres._cli import DSN_VARIABLE, main, where
from arkvory_sched.postgres._migrate import load_migrations
from tests.pg import drop_schema, schema_name

PYPROJECT_SCRIPTS = tomllib.loads(
    (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text(encoding="utf-8")
)["project"]["scripts"]
VERSIONS = [migration.version for migration in load_migrations()]
PROCESSES = 4
_SCRIPT = Path(sys.executable).with_name("arkvory-sched")


def test_the_console_script_reaches_main_through_the_launcher(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The script starts in _arkvory_launch so that a client-only install gets a hint
    # instead of a traceback (ADR 0026); --help shows that it arrives here.
    # pyproject.toml, not the installed metadata: a development environment installed
    # from an older checkout must not decide this test.
    script = EntryPoint("arkvory-sched", PYPROJECT_SCRIPTS["arkvory-sched"], "console_scripts")
    assert script.value == "_arkvory_launch:sched"
    monkeypatch.setattr(sys, "argv", ["arkvory-sched", "migrate", "--help"])
    with pytest.raises(SystemExit) as stop:
        script.load()()
    assert stop.value.code == 0
    assert "apply every pending migration" in capsys.readouterr().out


def test_missing_dsn_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(DSN_VARIABLE, raising=False)
    assert main(["migrate"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "--dsn" in captured.err
    assert DSN_VARIABLE in captured.err


@pytest.mark.parametrize(
    ("dsn", "said"),
    [
        ("mysql://root@localhost/test", "postgresql://"),
        ("localhost:5432", "postgresql://"),
        ("postgresql://u@localhost:port/test", "port"),
        ("postgresql://u@127.0.0.1:1/test?sslmode=sometimes", "sslmode"),
    ],
)
def test_a_dsn_that_is_not_a_usable_postgresql_url_is_a_usage_error(
    dsn: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["migrate", "--dsn", dsn]) == 2
    err = capsys.readouterr().err
    assert said in err
    assert len(err.strip().splitlines()) == 1


def test_a_bad_schema_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["migrate", "--dsn", "postgresql://x@127.0.0.1/db", "--schema", "Bad-Name"]) == 2
    err = capsys.readouterr().err
    assert "--schema" in err
    assert "'Bad-Name'" in err


def test_an_unreachable_server_fails_naming_the_host_without_a_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Port 1 on loopback: refused at once, no waiting for a timeout.
    code = main(["migrate", "--dsn", "postgresql://someone:secret@127.0.0.1:1/db"])
    assert code == 1
    err = capsys.readouterr().err
    assert "127.0.0.1:1/db" in err
    assert "Traceback" not in err
    assert "secret" not in err
    assert len(err.strip().splitlines()) == 1


def test_the_dsn_may_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(DSN_VARIABLE, "postgresql://postgres@127.0.0.1:1/fromenv")
    assert main(["migrate"]) == 1
    assert "127.0.0.1:1/fromenv" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("dsn", "shown"),
    [
        ("postgresql://u:pw@db.example:6432/queue", "db.example:6432/queue"),
        ("postgresql://u@db.example/queue", "db.example/queue"),
        ("postgresql:///queue?host=/run/postgresql", "/run/postgresql/queue"),
        ("postgresql://", "the default host"),
    ],
)
def test_messages_name_host_and_database_but_never_credentials(dsn: str, shown: str) -> None:
    assert where(dsn) == shown


def test_migrate_prints_each_version_then_up_to_date(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    schema = schema_name("c")
    try:
        assert main(["migrate", "--dsn", database_url, "--schema", schema]) == 0
        assert capsys.readouterr().out.splitlines() == [f"applied {v}" for v in VERSIONS]
        assert main(["migrate", "--dsn", database_url, "--schema", schema]) == 0
        assert capsys.readouterr().out.splitlines() == [f"up to date (schema {schema})"]
    finally:
        asyncio.run(drop_schema(schema))


def test_four_processes_migrating_at_once_apply_each_migration_once(
    database_url: str,
) -> None:
    assert _SCRIPT.exists(), f"{_SCRIPT} is missing: reinstall with pip install -e '.[test]'"
    schema = schema_name("p")
    command = [str(_SCRIPT), "migrate", "--dsn", database_url, "--schema", schema]
    try:
        began = time.perf_counter()
        processes = [
            subprocess.Popen(
                command,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(PROCESSES)
        ]
        outputs = [process.communicate(timeout=60) for process in processes]
        elapsed = time.perf_counter() - began
        codes = [process.returncode for process in processes]
        assert codes == [0] * PROCESSES, outputs
        lines = [line for out, _ in outputs for line in out.splitlines()]
        applied = sorted(
            line.removeprefix("applied ") for line in lines if line.startswith("applied")
        )
        assert applied == VERSIONS, lines
        assert all(line.startswith(("applied ", "up to date")) for line in lines), lines
        print(
            f"\n{PROCESSES} migrate processes: each migration applied once, "
            f"{elapsed * 1000:.0f} ms in all"
        )
    finally:
        asyncio.run(drop_schema(schema))
