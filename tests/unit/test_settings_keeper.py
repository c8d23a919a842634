"""The keeper's own rules (R-SET-3, R-SET-4, R-SET-6) on a store that fails on demand.

How the keeper meets the real stores is in the contract suite
(tests/contract/test_settings_store_contract.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

import anyio
import pytest

from arkvory_sched import (
    AuditEntry,
    AuditOutcome,
    InMemoryDownloadScheduler,
    SchedulerSettings,
    SettingsKeeper,
    SettingsStore,
    SettingsUnavailableError,
    StoredSettings,
)
from arkvory_sched.settings._keeper import DEFAULT_REFRESH_SECONDS

pytestmark = pytest.mark.anyio

ENVIRONMENT = SchedulerSettings(sessions=8)
#: A deadline for what a 50 ms refresh interval does at once: only a hang takes this long.
SETTLE_SECONDS = 30.0


class FlakyStore(SettingsStore):
    """A record in memory whose reads fail while ``down`` is set."""

    def __init__(self) -> None:
        self.record = StoredSettings(0, {}, None, None)
        self.down = False
        self.reads = 0

    @property
    def environment(self) -> SchedulerSettings:
        return ENVIRONMENT

    async def read(self) -> StoredSettings:
        self.reads += 1
        if self.down:
            raise SettingsUnavailableError("the settings database cannot be reached: down")
        return self.record

    async def _save(
        self, fields_json: str, updated_by: str, expected_revision: int
    ) -> StoredSettings | None:
        raise NotImplementedError

    async def _audit_refusal(
        self,
        outcome: AuditOutcome,
        fields: Mapping[str, object],
        expected_revision: int,
        updated_by: str,
        detail: str | None,
    ) -> tuple[int, str | None]:
        raise NotImplementedError

    async def history(self, *, limit: int = 50, before: int | None = None) -> list[AuditEntry]:
        raise NotImplementedError

    def save(self, revision: int, fields: Mapping[str, object]) -> None:
        self.record = StoredSettings(revision, fields, "ops", datetime.now(UTC))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def scheduler() -> InMemoryDownloadScheduler:
    return InMemoryDownloadScheduler(ENVIRONMENT, ticket_keys=[bytes(32)])


def test_the_default_interval_is_ten_seconds(scheduler: InMemoryDownloadScheduler) -> None:
    assert DEFAULT_REFRESH_SECONDS == 10.0
    assert SettingsKeeper(FlakyStore(), scheduler)._interval == 10.0
    with pytest.raises(ValueError, match="interval"):
        SettingsKeeper(FlakyStore(), scheduler, interval=0)


async def test_a_store_down_at_start_does_not_stop_the_process_and_is_retried(
    scheduler: InMemoryDownloadScheduler,
) -> None:
    store = FlakyStore()
    store.down = True
    store.save(3, {"sessions": 4})
    keeper = SettingsKeeper(store, scheduler, interval=0.05)
    async with anyio.create_task_group() as tasks:
        with anyio.fail_after(SETTLE_SECONDS):
            await tasks.start(keeper.run)  # started although the first read failed
        assert keeper.error is not None and "cannot be reached" in keeper.error
        assert (keeper.revision, scheduler.settings.sessions) == (0, 8), "the environment"
        store.down = False
        with anyio.fail_after(SETTLE_SECONDS):
            while keeper.revision != 3:
                await anyio.sleep(0.01)
        tasks.cancel_scope.cancel()
    assert scheduler.settings.sessions == 4
    assert keeper.error is None
    assert store.reads >= 2


async def test_a_record_unfit_for_this_server_runs_the_environment_and_says_why(
    scheduler: InMemoryDownloadScheduler,
) -> None:
    store = FlakyStore()
    store.save(1, {"sessions": 4})
    keeper = SettingsKeeper(store, scheduler)
    assert await keeper.refresh()
    assert scheduler.settings.sessions == 4
    # Saved by a server with more slots; unknown to this version too (R-SET-4, R-SET-6).
    store.save(2, {"reserve": 12, "windowsV9": {}})
    assert await keeper.refresh()
    assert scheduler.settings == ENVIRONMENT
    assert keeper.revision == 2
    assert len(keeper.problems) == 2
    assert any("'windowsV9'" in problem for problem in keeper.problems)
    assert any("'reserve'" in problem for problem in keeper.problems)


async def test_a_failure_to_configure_is_retried_on_the_next_refresh(
    scheduler: InMemoryDownloadScheduler, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FlakyStore()
    store.save(1, {"sessions": 4})
    keeper = SettingsKeeper(store, scheduler)

    async def broken(settings: SchedulerSettings) -> None:
        raise OSError("connection reset")

    monkeypatch.setattr(scheduler, "configure", broken)
    assert not await keeper.refresh()
    assert (keeper.revision, keeper.error) == (0, "connection reset")
    monkeypatch.undo()
    assert await keeper.refresh()
    assert (keeper.revision, scheduler.settings.sessions) == (1, 4)


async def test_concurrent_refreshes_apply_one_revision_once(
    scheduler: InMemoryDownloadScheduler,
) -> None:
    store = FlakyStore()
    store.save(1, {"sessions": 4})
    keeper = SettingsKeeper(store, scheduler)
    applied: list[bool] = []

    async def refresh() -> None:
        applied.append(await keeper.refresh())

    async with anyio.create_task_group() as tasks:
        for _ in range(8):
            tasks.start_soon(refresh)
    assert sorted(applied) == [False] * 7 + [True]
