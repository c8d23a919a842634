"""What only the SQLite store does: a file shared by processes, and the ticket key in it.

The settings contract itself runs on SQLite in tests/contract/test_settings_store_contract.py.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path
from typing import Final

import pytest

from arkvory_sched import (
    AuditOutcome,
    ConfigurationError,
    SchedulerSettings,
    SettingsUnavailableError,
)
from arkvory_sched.sqlite import (
    LEGACY_KEY_FILE_NAME,
    SETTINGS_FILE_NAME,
    SqliteSettingsStore,
    load_or_create_ticket_key,
    settings_file,
)
from arkvory_sched.sqlite._database import named_statements, when_not_busy
from tests.contract.test_settings_store_contract import all_history

ROOT: Final = Path(__file__).resolve().parents[2]
ENVIRONMENT: Final = SchedulerSettings(sessions=16)
PROCESSES: Final = 4
WRITES_PER_PROCESS: Final = 50


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def start_process(*argv: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.contract._store_process", *argv],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def output_of(process: subprocess.Popen[str]) -> str:
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    return out.strip()


# --------------------------------------------------------------------------- the file


@pytest.mark.anyio
async def test_processes_writing_one_file_at_once_lose_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "settings.sqlite3")  # created by whichever process comes first
    started = [
        start_process("sqlite", path, "writes", str(WRITES_PER_PROCESS), f"process-{n}")
        for n in range(PROCESSES)
    ]
    mismatches = sum(int(output_of(process)) for process in started)
    store = SqliteSettingsStore(path, environment=ENVIRONMENT)
    try:
        assert (await store.read()).revision == PROCESSES * WRITES_PER_PROCESS
        outcomes = [entry.outcome for entry in await all_history(store)]
        assert outcomes.count(AuditOutcome.APPLIED) == PROCESSES * WRITES_PER_PROCESS
        assert outcomes.count(AuditOutcome.REVISION_MISMATCH) == mismatches
    finally:
        await store.close()


@pytest.mark.anyio
async def test_the_file_is_private_and_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "new" / "settings.sqlite3"
    store = SqliteSettingsStore(path, environment=ENVIRONMENT)
    try:
        await store.read()
    finally:
        await store.close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600, "it holds the ticket key"
    assert path.read_bytes()[18:20] == b"\x02\x02", "WAL in the file header"


@pytest.mark.anyio
async def test_a_file_that_cannot_be_opened_is_one_error_of_the_port(tmp_path: Path) -> None:
    (tmp_path / "not-a-database").write_bytes(b"x" * 4096)
    store = SqliteSettingsStore(tmp_path / "not-a-database", environment=ENVIRONMENT)
    with pytest.raises(SettingsUnavailableError, match="not-a-database"):
        await store.read()
    await store.close()


def test_the_settings_file_is_hidden_in_the_directory_unless_the_variable_says(
    tmp_path: Path,
) -> None:
    assert settings_file(tmp_path, {}) == tmp_path / SETTINGS_FILE_NAME
    assert SETTINGS_FILE_NAME.startswith(".")
    elsewhere = tmp_path / "etc" / "arkvory.sqlite3"
    assert settings_file(tmp_path, {"ARKVORY_SETTINGS_FILE": str(elsewhere)}) == elsewhere


# --------------------------------------------------------------------------- the ticket key


def test_the_ticket_key_is_created_once_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "settings.sqlite3"
    key = load_or_create_ticket_key(path)
    assert len(key) == 32
    assert load_or_create_ticket_key(path) == key, "the same key after a restart"
    assert load_or_create_ticket_key(tmp_path / "other.sqlite3") != key


def test_two_processes_started_at_once_agree_on_one_key(tmp_path: Path) -> None:
    path = str(tmp_path / "settings.sqlite3")
    for _ in range(3):  # the race is short: give it several chances to go wrong
        started = [start_process("key", path) for _ in range(2)]
        keys = {output_of(process) for process in started}
        assert len(keys) == 1
        assert bytes.fromhex(keys.pop()) == load_or_create_ticket_key(path)


def test_a_legacy_key_file_is_imported_once(tmp_path: Path) -> None:
    legacy = tmp_path / LEGACY_KEY_FILE_NAME
    old_key = bytes(range(32))
    legacy.write_text(old_key.hex() + "\n")
    path = tmp_path / "settings.sqlite3"
    assert load_or_create_ticket_key(path, legacy_key_file=legacy) == old_key
    legacy.write_text(bytes(range(1, 33)).hex() + "\n")
    assert load_or_create_ticket_key(path, legacy_key_file=legacy) == old_key, "imported once"
    legacy.unlink()
    assert load_or_create_ticket_key(path, legacy_key_file=legacy) == old_key


def test_a_missing_legacy_file_means_a_new_key(tmp_path: Path) -> None:
    key = load_or_create_ticket_key(
        tmp_path / "settings.sqlite3", legacy_key_file=tmp_path / LEGACY_KEY_FILE_NAME
    )
    assert len(key) == 32


def test_a_legacy_file_that_is_not_a_key_is_a_configuration_error(tmp_path: Path) -> None:
    legacy = tmp_path / LEGACY_KEY_FILE_NAME
    legacy.write_text("zz\n")
    with pytest.raises(ConfigurationError, match="key file"):
        load_or_create_ticket_key(tmp_path / "settings.sqlite3", legacy_key_file=legacy)


def test_the_statement_file_is_read_by_name_without_its_comments() -> None:
    text = "-- file comment\n-- name: one\n-- why\nSELECT 1\n\n-- name: two\nSELECT 2\n"
    assert named_statements(text) == {"one": "SELECT 1", "two": "SELECT 2"}
    with pytest.raises(ValueError, match="'one'"):
        named_statements("-- name: one\nSELECT 1\n-- name: one\nSELECT 2\n")
    with pytest.raises(ValueError, match="'empty'"):
        named_statements("-- name: empty\n-- only a comment\n")


def test_a_busy_file_is_tried_again_and_other_errors_are_not() -> None:
    """SQLite's busy handler is not fair under many writers: "locked" is waited out,
    anything else is raised at once."""
    calls: list[int] = []

    def locked_twice() -> str:
        calls.append(1)
        if len(calls) <= 2:
            raise sqlite3.OperationalError("database is locked")
        return "done"

    assert when_not_busy(locked_twice) == "done"
    assert len(calls) == 3

    def broken() -> None:
        calls.append(1)
        raise sqlite3.OperationalError("no such table: download_settings")

    calls.clear()
    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        when_not_busy(broken)
    assert len(calls) == 1
