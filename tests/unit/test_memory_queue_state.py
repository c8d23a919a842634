"""The in-memory store's queue state beyond :data:`EXACT_UP_TO` waiters: the waiting
bytes per class are shared out by count instead of walked (the core counts bytes only
in total), which is exact while one class waits and keeps the total otherwise."""

from __future__ import annotations

import pytest

from arkvory_sched import (
    DownloadClass,
    DownloadRequest,
    InMemoryDownloadScheduler,
    PrincipalKind,
    Queued,
    SchedulerSettings,
)
from arkvory_sched.memory._queue_state import EXACT_UP_TO
from arkvory_sched.testing import FakeClock

pytestmark = pytest.mark.anyio
MIB = 1024 * 1024


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def request(number: int, cls: str, size: int) -> DownloadRequest:
    return DownloadRequest(
        principal=f"agent-{number % 97}",
        principal_kind=PrincipalKind.SERVICE,
        object_id=f"objects/{cls}/{number}.bin",
        object_size=size,
        download_id=f"{cls}-{number}",
        requested_class=cls,
    )


async def queue(scheduler: InMemoryDownloadScheduler, count: int, cls: str, size: int) -> None:
    for number in range(count):
        decision = await scheduler.admit(request(number, cls, size))
        assert isinstance(decision, Queued), decision


async def fill(waiters: dict[str, tuple[int, int]]) -> InMemoryDownloadScheduler:
    settings = SchedulerSettings(sessions=1, queue_limit=20_000, queue_per_principal=20_000)
    scheduler = InMemoryDownloadScheduler(settings, clock=FakeClock())
    holder = await scheduler.admit(request(-1, "release", 64 * MIB))
    assert not isinstance(holder, Queued)
    for cls, (count, size) in waiters.items():
        await queue(scheduler, count, cls, size)
    return scheduler


async def test_one_class_beyond_the_walk_is_still_exact() -> None:
    scheduler = await fill({"bulk": (EXACT_UP_TO + 50, 20 * MIB)})
    state = await scheduler.queue_state()
    assert state.stats.waiting == EXACT_UP_TO + 50
    assert state.per_class[DownloadClass.BULK].waiting_bytes == (EXACT_UP_TO + 50) * 20 * MIB
    assert state.per_class[DownloadClass.BACKGROUND].waiting_bytes == 0


async def test_several_classes_beyond_the_walk_share_the_total_by_count() -> None:
    scheduler = await fill({"bulk": (EXACT_UP_TO, 20 * MIB), "background": (100, 40 * MIB)})
    state = await scheduler.queue_state()
    bulk = state.per_class[DownloadClass.BULK].waiting_bytes
    background = state.per_class[DownloadClass.BACKGROUND].waiting_bytes
    total = EXACT_UP_TO * 20 * MIB + 100 * 40 * MIB
    assert total - 4 <= bulk + background <= total
    assert background == pytest.approx(total * 100 / (EXACT_UP_TO + 100), abs=1)
