"""The settings store contract (R-SET-1/2/5, R-CLASS-6, ADR 0022), run on every store.

Each test gets :class:`Stores` for one implementation: ``open()`` makes a new store
object on the same record (the same SQLite file, the same PostgreSQL schema), like a
restarted process or a second process would. PostgreSQL gets a fresh migrated schema
per test and must run under CI (``tests.pg.require_database``).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Final

import anyio
import pytest
from _pytest.fixtures import SubRequest

from arkvory_sched import (
    AuditEntry,
    AuditOutcome,
    DownloadClass,
    InMemoryDownloadScheduler,
    RevisionMismatchError,
    SchedulerSettings,
    SettingsError,
    SettingsKeeper,
    SettingsStore,
)
from arkvory_sched.postgres import PostgresSettingsStore
from arkvory_sched.settings._store import apply_stored
from arkvory_sched.sqlite import SqliteSettingsStore
from tests.pg import drop_schema, new_schema, require_database

pytestmark = pytest.mark.anyio

ROOT: Final = Path(__file__).resolve().parents[2]
ENVIRONMENT: Final = SchedulerSettings(sessions=16)
WRITERS: Final = 16
UPDATES_PER_WRITER: Final = 100
STORE_OBJECTS: Final = 4  # the writers share these: tasks on one object and across objects
WINDOW: Final = {"weekdays": ["mon", "tue"], "start": "22:00", "end": "06:00", "zone": "UTC"}
POLICY: Final[dict[str, object]] = {
    "sessions": 8,
    "weights": [6, 3, 2, 1],
    "classWindows": {"bulk": {"windows": [WINDOW], "outsideShare": 0.25}},
    "serviceAccountClasses": {"ci-bot": "bulk", "nightly-link": "release"},
}


class Stores:
    """Store objects of one implementation on one record; all closed after the test."""

    def __init__(self, kind: str, location: list[str]) -> None:
        self.kind = kind
        self.location = location  # the argv of tests.contract._store_process
        self.opened: list[SettingsStore] = []

    def open(self, environment: SchedulerSettings = ENVIRONMENT) -> SettingsStore:
        store: SettingsStore
        if self.kind == "sqlite":
            store = SqliteSettingsStore(self.location[1], environment=environment)
        else:
            dsn, schema = self.location[1:]
            store = PostgresSettingsStore(dsn, environment=environment, schema=schema)
        self.opened.append(store)
        return store

    def in_another_process(self, *command: str) -> str:
        """Run ``command`` on the same record in a new Python process; its output."""
        done = subprocess.run(
            [sys.executable, "-m", "tests.contract._store_process", *self.location, *command],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # asyncpg runs on asyncio only


@pytest.fixture(params=["sqlite", "postgres"])
async def stores(request: SubRequest, tmp_path: Path) -> AsyncIterator[Stores]:
    schema: str | None = None
    if request.param == "sqlite":
        made = Stores("sqlite", ["sqlite", str(tmp_path / "settings.sqlite3")])
    else:
        url = require_database()
        schema = await new_schema("settings")
        made = Stores("postgres", ["postgres", url, schema])
    try:
        yield made
    finally:
        for store in made.opened:
            await store.close()
        if schema is not None:
            await drop_schema(schema)


async def all_history(store: SettingsStore, page: int = 500) -> list[AuditEntry]:
    """Every audit entry, newest first, read page by page as an operator would."""
    entries: list[AuditEntry] = []
    before: int | None = None
    while batch := await store.history(limit=page, before=before):
        entries.extend(batch)
        before = batch[-1].id
    return entries


# --------------------------------------------------------------------------- the record


async def test_a_fresh_record_is_revision_zero_and_empty(stores: Stores) -> None:
    stored = await stores.open().read()
    assert (stored.revision, dict(stored.fields), stored.updated_by, stored.updated_at) == (
        0,
        {},
        None,
        None,
    )
    assert await stores.open().history() == []


async def test_a_compare_and_set_bumps_the_revision_by_exactly_one(stores: Stores) -> None:
    store = stores.open()
    saved = await store.compare_and_set(
        {"sessions": 8, "weights": (6, 3, 2, 1)}, expected_revision=0, updated_by="alice"
    )
    assert saved.revision == 1
    assert dict(saved.fields) == {"sessions": 8, "weights": [6, 3, 2, 1]}
    assert saved.updated_by == "alice"
    assert saved.updated_at is not None
    assert saved.updated_at.utcoffset() is not None, "an aware time, comparable across stores"
    assert await store.read() == saved

    again = await store.compare_and_set({"sessions": 9}, expected_revision=1, updated_by="bob")
    assert (again.revision, dict(again.fields), again.updated_by) == (2, {"sessions": 9}, "bob")


async def test_a_stale_revision_is_refused_with_the_current_one_and_who_made_it(
    stores: Stores,
) -> None:
    store = stores.open()
    await store.compare_and_set({"idleSeconds": 10}, expected_revision=0, updated_by="alice")
    await store.compare_and_set({"idleSeconds": 20}, expected_revision=1, updated_by="carol")
    with pytest.raises(RevisionMismatchError) as caught:
        await store.compare_and_set({"idleSeconds": 30}, expected_revision=1, updated_by="bob")
    assert (caught.value.expected, caught.value.current, caught.value.updated_by) == (
        1,
        2,
        "carol",
    )
    stored = await store.read()
    assert (stored.revision, dict(stored.fields), stored.updated_by) == (
        2,
        {"idleSeconds": 20},
        "carol",
    )


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"sesions": 8}, "sesions"),  # unknown: refused on writing, unlike on reading
        ({"queueLimit": 10}, "queueLimit"),  # environment-only
        ({"sessions": 0}, "sessions"),
        ({"reserve": 16}, "reserve"),  # needs sessions - 1 or less
        ({"weights": [8, 4, 2]}, "weights"),  # all four at once
        ({"idleSeconds": "30"}, "idleSeconds"),
        ({"preempt": 1}, "preempt"),
        (
            {"classWindows": {"bulk": {"windows": [{**WINDOW, "zone": "Nowhere/Atlantis"}]}}},
            "classWindows/bulk/windows/0/zone",
        ),
        ({"serviceAccountClasses": {"ci-bot": "fastest"}}, "serviceAccountClasses/ci-bot"),
    ],
)
async def test_fields_that_cannot_work_are_refused_naming_the_camel_path(
    stores: Stores, fields: dict[str, object], field: str
) -> None:
    store = stores.open()
    await store.compare_and_set({"idleSeconds": 10}, expected_revision=0, updated_by="alice")
    with pytest.raises(SettingsError) as caught:
        await store.compare_and_set(fields, expected_revision=1, updated_by="mallory")
    assert caught.value.field == field
    stored = await store.read()
    assert (stored.revision, dict(stored.fields)) == (1, {"idleSeconds": 10}), "nothing saved"
    refused, applied = await store.history()
    assert (refused.outcome, refused.actor, refused.revision) == (
        AuditOutcome.INVALID,
        "mallory",
        1,
    )
    assert refused.detail is not None and field in refused.detail
    assert applied.outcome is AuditOutcome.APPLIED


async def test_fields_are_validated_against_the_environment_of_the_store(
    stores: Stores,
) -> None:
    small = stores.open(SchedulerSettings(sessions=4))
    with pytest.raises(SettingsError) as caught:
        await small.compare_and_set({"reserve": 5}, expected_revision=0, updated_by="a")
    assert caught.value.field == "reserve"
    saved = await small.compare_and_set({"reserve": 3}, expected_revision=0, updated_by="a")
    assert saved.revision == 1


async def test_an_empty_record_returns_to_the_environment(stores: Stores) -> None:
    store = stores.open()
    await store.compare_and_set(POLICY, expected_revision=0, updated_by="alice")
    back = await store.compare_and_set({}, expected_revision=1, updated_by="alice")
    assert (back.revision, dict(back.fields)) == (2, {})
    settings, problems = apply_stored(ENVIRONMENT, back.fields)
    assert (settings, problems) == (ENVIRONMENT, [])
    (entry, _) = await store.history(limit=2)
    assert set(entry.change) == set(POLICY), "the return names every field it undid"
    assert all(change["to"] is None for change in entry.change.values())


# --------------------------------------------------------------------------- the audit


async def test_every_change_and_every_refusal_is_in_the_history_newest_first(
    stores: Stores,
) -> None:
    store = stores.open()
    await store.compare_and_set({"sessions": 8}, expected_revision=0, updated_by="alice")
    with pytest.raises(RevisionMismatchError):
        await store.compare_and_set({"sessions": 9}, expected_revision=0, updated_by="bob")
    with pytest.raises(SettingsError):
        await store.compare_and_set({"sessions": -1}, expected_revision=1, updated_by="eve")
    await store.compare_and_set(
        {"sessions": 8, "preempt": False}, expected_revision=1, updated_by="carol"
    )

    entries = await store.history()
    assert [(e.actor, e.outcome, e.expected_revision, e.revision) for e in entries] == [
        ("carol", AuditOutcome.APPLIED, 1, 2),
        ("eve", AuditOutcome.INVALID, 1, 1),
        ("bob", AuditOutcome.REVISION_MISMATCH, 0, 1),
        ("alice", AuditOutcome.APPLIED, 0, 1),
    ]
    carol, eve, bob, alice = entries
    assert [e.id for e in entries] == sorted((e.id for e in entries), reverse=True)
    assert dict(alice.change) == {"sessions": {"from": None, "to": 8}}
    assert dict(bob.change) == {"sessions": {"from": 8, "to": 9}}, "against the record met"
    assert dict(eve.change) == {"sessions": {"from": 8, "to": -1}}
    assert dict(carol.change) == {"preempt": {"from": None, "to": False}}
    assert bob.detail is not None and "alice" in bob.detail and "revision 1" in bob.detail
    assert alice.detail is None and carol.detail is None
    assert carol.at >= alice.at

    first_page = await store.history(limit=3)
    assert first_page == entries[:3]
    assert await store.history(limit=3, before=first_page[-1].id) == entries[3:]
    assert await store.history(limit=3, before=alice.id) == []
    for limit in (0, -1):
        with pytest.raises(ValueError, match="limit"):
            await store.history(limit=limit)


async def test_sixteen_writers_times_one_hundred_lose_nothing_and_audit_every_refusal(
    stores: Stores,
) -> None:
    objects = [stores.open() for _ in range(STORE_OBJECTS)]
    won: list[int] = []
    mismatches = 0
    start = asyncio.Event()

    async def writer(number: int) -> None:
        nonlocal mismatches
        store = objects[number % STORE_OBJECTS]
        await start.wait()
        for iteration in range(UPDATES_PER_WRITER):
            # A value only this writer and iteration produce, so a lost update would show.
            value = 1 + number * UPDATES_PER_WRITER + iteration
            while True:
                current = await store.read()
                try:
                    saved = await store.compare_and_set(
                        {"idleSeconds": value},
                        expected_revision=current.revision,
                        updated_by=f"writer-{number}",
                    )
                except RevisionMismatchError as error:
                    assert error.current > current.revision
                    mismatches += 1
                    continue
                assert saved.revision == current.revision + 1
                assert dict(saved.fields) == {"idleSeconds": value}
                won.append(saved.revision)
                break

    tasks = [asyncio.create_task(writer(number)) for number in range(WRITERS)]
    await asyncio.sleep(0.05)
    began = time.perf_counter()
    start.set()
    await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - began

    total = WRITERS * UPDATES_PER_WRITER
    figure = (
        f"{stores.kind}: {WRITERS} writers x {UPDATES_PER_WRITER} compare-and-set on "
        f"{STORE_OBJECTS} store objects: {len(won)} saved, {mismatches} mismatches retried, "
        f"{elapsed:.2f} s"
    )
    print("\n" + figure)
    final = await objects[0].read()
    assert final.revision == total, figure
    assert sorted(won) == list(range(1, total + 1)), figure  # 0 lost, 0 twice

    entries = await all_history(objects[1])
    outcomes = [entry.outcome for entry in entries]
    assert outcomes.count(AuditOutcome.APPLIED) == total, figure
    assert outcomes.count(AuditOutcome.REVISION_MISMATCH) == mismatches, figure
    applied = sorted(e.revision for e in entries if e.outcome is AuditOutcome.APPLIED)
    assert applied == list(range(1, total + 1)), "one audit row per revision"


# --------------------------------------------------------------------------- restarts


async def test_a_restart_keeps_the_record_with_windows_and_service_account_classes(
    stores: Stores,
) -> None:
    first = stores.open()
    saved = await first.compare_and_set(POLICY, expected_revision=0, updated_by="alice")
    await first.close()

    reopened = await stores.open().read()
    assert reopened == saved
    settings, problems = apply_stored(ENVIRONMENT, reopened.fields)
    assert problems == []
    assert settings.sessions == 8
    assert dict(settings.service_account_classes) == {
        "ci-bot": DownloadClass.BULK,
        "nightly-link": DownloadClass.RELEASE,
    }
    (bulk, schedule), *_ = settings.class_windows
    assert (bulk, schedule.outside_share, len(schedule.windows)) == (DownloadClass.BULK, 0.25, 1)
    assert settings.operator_fields()["classWindows"] == POLICY["classWindows"]

    # And the same record from another process, which changes it in turn.
    seen = json.loads(stores.in_another_process("read"))
    assert seen == {"revision": 1, "fields": POLICY, "updatedBy": "alice"}
    assert stores.in_another_process("write", "1", '{"sessions": 6}', "bob") == "2"
    after = await stores.open().read()
    assert (after.revision, dict(after.fields), after.updated_by) == (2, {"sessions": 6}, "bob")
    assert [entry.actor for entry in await stores.open().history()] == ["bob", "alice"]


# --------------------------------------------------------------------------- the keeper


class RecordingScheduler(InMemoryDownloadScheduler):
    """The in-memory scheduler, counting what ``configure`` was given."""

    def __init__(self, settings: SchedulerSettings) -> None:
        super().__init__(settings, ticket_keys=[bytes(32)])
        self.configured: list[SchedulerSettings] = []

    async def configure(self, settings: SchedulerSettings) -> None:
        self.configured.append(settings)
        await super().configure(settings)


async def test_the_keeper_applies_only_newer_revisions(stores: Stores) -> None:
    store = stores.open()
    scheduler = RecordingScheduler(ENVIRONMENT)
    keeper = SettingsKeeper(store, scheduler)
    assert not await keeper.refresh(), "revision 0 is the environment, already running"
    assert scheduler.configured == []

    await store.compare_and_set(POLICY, expected_revision=0, updated_by="alice")
    assert await keeper.refresh()
    assert not await keeper.refresh()
    assert len(scheduler.configured) == 1
    assert (keeper.revision, keeper.updated_by, keeper.problems) == (1, "alice", ())
    assert keeper.updated_at is not None
    assert scheduler.settings.sessions == 8
    assert dict(scheduler.settings.service_account_classes)["ci-bot"] is DownloadClass.BULK

    # A keeper that already runs a later revision (applied from elsewhere) keeps it.
    keeper.revision = 5
    await store.compare_and_set({}, expected_revision=1, updated_by="bob")
    assert not await keeper.refresh()
    assert scheduler.settings.sessions == 8
    await scheduler.close()


async def test_a_change_reaches_another_keeper_within_one_interval(stores: Stores) -> None:
    interval = 0.3
    writer, reader = stores.open(), stores.open()
    scheduler = RecordingScheduler(ENVIRONMENT)
    keeper = SettingsKeeper(reader, scheduler, interval=interval)
    async with anyio.create_task_group() as tasks:
        await tasks.start(keeper.run)
        await anyio.sleep(interval / 2)  # the change lands in the middle of an interval
        await writer.compare_and_set({"sessions": 5}, expected_revision=0, updated_by="ops")
        saved_at = time.perf_counter()
        with anyio.fail_after(interval + 2.0):
            while keeper.revision < 1:
                await anyio.sleep(0.01)
        waited = time.perf_counter() - saved_at
        tasks.cancel_scope.cancel()
    assert scheduler.settings.sessions == 5
    assert waited <= interval + 0.5, f"{waited:.2f} s for an interval of {interval} s"
    await scheduler.close()


async def test_a_keeper_told_to_refresh_applies_at_once(stores: Stores) -> None:
    store = stores.open()
    scheduler = RecordingScheduler(ENVIRONMENT)
    keeper = SettingsKeeper(store, scheduler)  # 10 s: never reached within this test
    async with anyio.create_task_group() as tasks:
        await tasks.start(keeper.run)
        await store.compare_and_set({"sessions": 3}, expected_revision=0, updated_by="ops")
        keeper.wake()
        with anyio.fail_after(2.0):
            while keeper.revision < 1:
                await anyio.sleep(0.01)
        tasks.cancel_scope.cancel()
    assert scheduler.settings.sessions == 3
    await scheduler.close()
