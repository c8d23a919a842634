"""The settings record: compare-and-set without lost updates, validation, soft reading."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime

import asyncpg
import pytest

from arkvory_sched import SchedulerSettings, SettingsError, Strategy
from arkvory_sched.postgres import (
    RevisionMismatchError,
    SettingsStore,
    StoredSettings,
    apply_stored,
)

pytestmark = pytest.mark.anyio

WRITERS = 16
UPDATES_PER_WRITER = 100
ENVIRONMENT = SchedulerSettings(sessions=16)


def _store(pool: asyncpg.Pool, schema: str) -> SettingsStore:
    return SettingsStore(pool, environment=ENVIRONMENT, schema=schema)


async def test_a_fresh_record_is_revision_zero_and_empty(pool: asyncpg.Pool, schema: str) -> None:
    stored = await _store(pool, schema).read()
    assert stored == StoredSettings(revision=0, fields={}, updated_by=None, updated_at=None)


async def test_a_successful_compare_and_set_bumps_the_revision_by_one(
    pool: asyncpg.Pool, schema: str
) -> None:
    store = _store(pool, schema)
    saved = await store.compare_and_set(
        {"sessions": 8, "weights": (6, 3, 2, 1)}, expected_revision=0, updated_by="alice"
    )
    assert saved.revision == 1
    assert dict(saved.fields) == {"sessions": 8, "weights": [6, 3, 2, 1]}
    assert saved.updated_by == "alice"
    assert isinstance(saved.updated_at, datetime)
    assert await store.read() == saved

    back = await store.compare_and_set({}, expected_revision=1, updated_by="bob")
    assert (back.revision, dict(back.fields), back.updated_by) == (2, {}, "bob")


async def test_a_stale_revision_is_refused_with_the_current_one(
    pool: asyncpg.Pool, schema: str
) -> None:
    store = _store(pool, schema)
    await store.compare_and_set({"idleSeconds": 10}, expected_revision=0, updated_by="a")
    await store.compare_and_set({"idleSeconds": 20}, expected_revision=1, updated_by="a")
    with pytest.raises(RevisionMismatchError) as caught:
        await store.compare_and_set({"idleSeconds": 30}, expected_revision=1, updated_by="b")
    assert (caught.value.expected, caught.value.current) == (1, 2)
    stored = await store.read()
    assert (stored.revision, dict(stored.fields), stored.updated_by) == (
        2,
        {"idleSeconds": 20},
        "a",
    )


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"sesions": 8}, "sesions"),  # unknown: refused on writing, unlike on reading
        ({"queueLimit": 10}, "queueLimit"),  # environment-only
        ({"sessions": 0}, "sessions"),
        ({"reserve": 16}, "reserve"),  # needs sessions - 1 or less
        ({"perPrincipal": 0}, "perPrincipal"),
        ({"weights": [8, 4, 2]}, "weights"),  # all four at once
        ({"idleSeconds": "30"}, "idleSeconds"),
        ({"strategy": "fastest"}, "strategy"),
        ({"preempt": 1}, "preempt"),
    ],
)
async def test_fields_that_cannot_work_are_refused_before_saving(
    pool: asyncpg.Pool, schema: str, fields: dict[str, object], field: str
) -> None:
    store = _store(pool, schema)
    with pytest.raises(SettingsError) as caught:
        await store.compare_and_set(fields, expected_revision=0, updated_by="mallory")
    assert caught.value.field == field
    assert await store.read() == StoredSettings(0, {}, None, None)


async def test_fields_are_validated_against_the_environment_of_the_store(
    pool: asyncpg.Pool, schema: str
) -> None:
    small = SettingsStore(pool, environment=SchedulerSettings(sessions=4), schema=schema)
    with pytest.raises(SettingsError) as caught:
        await small.compare_and_set({"reserve": 5}, expected_revision=0, updated_by="a")
    assert caught.value.field == "reserve"
    saved = await small.compare_and_set({"reserve": 3}, expected_revision=0, updated_by="a")
    assert saved.revision == 1


async def test_sixteen_writers_times_one_hundred_updates_lose_nothing(
    pool: asyncpg.Pool, schema: str
) -> None:
    store = _store(pool, schema)
    won: list[int] = []
    mismatches = 0
    start = asyncio.Event()

    async def writer(number: int) -> None:
        nonlocal mismatches
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
                except RevisionMismatchError:
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
        f"{WRITERS} writers x {UPDATES_PER_WRITER} compare-and-set: {len(won)} saved, "
        f"{mismatches} mismatches retried, {elapsed:.2f} s"
    )
    print("\n" + figure)
    final = await store.read()
    assert final.revision == total, figure
    assert len(set(won)) == len(won), figure
    assert sorted(won) == list(range(1, total + 1)), figure


async def test_apply_stored_reads_softly() -> None:
    environment = SchedulerSettings(sessions=8)

    settings, problems = apply_stored(environment, {})
    assert (settings, problems) == (environment, [])

    settings, problems = apply_stored(environment, {"idleSeconds": 12, "windowsV9": {"x": 1}})
    assert settings == environment.with_changes(idle_seconds=12)
    assert len(problems) == 1
    assert "'windowsV9'" in problems[0]
    assert "skipped" in problems[0]

    # Fits a 16-slot server, not this 8-slot one (R-SET-6): the whole record is set aside.
    settings, problems = apply_stored(environment, {"idleSeconds": 12, "reserve": 10})
    assert settings == environment
    assert len(problems) == 1
    assert "'reserve'" in problems[0]
    assert "environment" in problems[0]

    settings, problems = apply_stored(environment, {"perPrincipal": 0})
    assert settings == environment
    assert "'perPrincipal'" in problems[0]

    settings, problems = apply_stored(environment, {"strategy": "shared", "sessions": 4})
    assert settings.strategy is Strategy.SHARED
    assert (settings.sessions, settings.reserve, settings.per_principal) == (4, 1, 1)
    assert problems == []


async def test_what_was_saved_applies_the_same_on_reading(pool: asyncpg.Pool, schema: str) -> None:
    store = _store(pool, schema)
    changes: dict[str, object] = {
        "strategy": "smallest-first",
        "sessions": 6,
        "weights": [5, 4, 3, 2],
        "sessionMinBytes": 1024,
        "agingMinutes": 2.5,
        "preempt": False,
        "rangesPerSession": 2,
    }
    saved = await store.compare_and_set(changes, expected_revision=0, updated_by="ops")
    settings, problems = apply_stored(ENVIRONMENT, (await store.read()).fields)
    assert problems == []
    assert saved.fields == changes
    assert settings.operator_fields() == {
        **ENVIRONMENT.operator_fields(),
        **changes,
        "reserve": 1,
        "perPrincipal": 1,
    }
