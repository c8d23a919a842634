"""What only the PostgreSQL settings store does: the trigger-written audit, its own pool.

The store's contract (revisions, refusals, history, 16 × 100 concurrent writers,
restarts) is proven for every store by tests/contract/test_settings_store_contract.py.
"""

from __future__ import annotations

import asyncpg
import pytest

from arkvory_sched import AuditOutcome, SchedulerSettings, SettingsUnavailableError
from arkvory_sched.postgres import PostgresSettingsStore

pytestmark = pytest.mark.anyio

ENVIRONMENT = SchedulerSettings(sessions=16)


async def test_the_trigger_audits_any_change_and_only_a_committed_one(
    pool: asyncpg.Pool, schema: str, db: asyncpg.Connection
) -> None:
    """The audit row is written inside the statement that changes the record: a change
    rolled back takes its row with it, and no change (even one a DBA makes by hand)
    exists without one."""
    transaction = db.transaction()
    await transaction.start()
    await db.execute("UPDATE download_settings SET revision = revision + 1, updated_by = 'x'")
    await transaction.rollback()
    assert await db.fetchval("SELECT count(*) FROM download_settings_audit") == 0

    await db.execute(
        "UPDATE download_settings SET revision = revision + 1, updated_by = 'dba', "
        """fields = '{"idleSeconds": 5}', updated_at = now()"""
    )
    store = PostgresSettingsStore(pool, environment=ENVIRONMENT, schema=schema)
    (entry,) = await store.history()
    assert (entry.actor, entry.outcome, entry.expected_revision, entry.revision) == (
        "dba",
        AuditOutcome.APPLIED,
        0,
        1,
    )
    assert dict(entry.change) == {"idleSeconds": {"from": None, "to": 5}}


async def test_a_store_given_a_dsn_opens_its_own_pool_and_closes_it(
    database_url: str, schema: str
) -> None:
    store = PostgresSettingsStore(database_url, environment=ENVIRONMENT, schema=schema)
    assert (await store.read()).revision == 0
    own = store._own_pool
    assert own is not None
    await store.close()
    assert own.is_closing()
    # Opened again on the next use: a keeper outliving a close keeps working.
    assert (await store.read()).revision == 0
    await store.close()


async def test_an_unreachable_database_is_one_error_of_the_port() -> None:
    store = PostgresSettingsStore("postgresql://postgres@127.0.0.1:9/none", environment=ENVIRONMENT)
    try:
        with pytest.raises(SettingsUnavailableError, match="cannot be reached"):
            await store.read()
        with pytest.raises(SettingsUnavailableError):
            await store.compare_and_set({}, expected_revision=0, updated_by="ops")
    finally:
        await store.close()
