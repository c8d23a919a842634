"""The operator page's last hour: a bounded ring of samples, one per interval (R-VIS-2)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

import anyio
import pytest

from arkvory_sched import DownloadClass, DownloadScheduler, StoreUnavailableError
from arkvory_sched.api import HISTORY_SAMPLE_SECONDS, HISTORY_SAMPLES, QueueHistory
from arkvory_sched.api._history import history_document
from arkvory_sched.testing import FakeClock

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class _Counts:
    waiting: int
    active: int
    oldest_wait_seconds: float


@dataclass
class _Stats:
    per_class: dict[DownloadClass, _Counts]


@dataclass
class _Queue:
    """Answers ``stats()`` like a scheduler, with ``waiting`` rising by one per call."""

    calls: int = 0
    failing: bool = False
    seen: list[int] = field(default_factory=list)

    async def stats(self) -> _Stats:
        if self.failing:
            raise StoreUnavailableError("the queue cannot be read")
        self.calls += 1
        return _Stats(
            {
                cls: _Counts(self.calls * (cls.rank + 1), cls.rank, 1.5 * self.calls)
                for cls in DownloadClass
            }
        )


def history_of(queue: _Queue, clock: FakeClock, points: int = 3) -> QueueHistory:
    return QueueHistory(cast(DownloadScheduler, queue), points=points, clock=clock)


async def test_the_history_keeps_only_the_newest_samples() -> None:
    clock = FakeClock(wall=1_800_000_000.0)
    history = history_of(_Queue(), clock)
    for _ in range(5):
        await history.sample()
        clock.advance(10.0)
    samples = history.samples()
    assert len(samples) == 3, "bounded by its capacity"
    assert [s.at for s in samples] == [1_800_000_020.0, 1_800_000_030.0, 1_800_000_040.0]
    assert [s.classes[DownloadClass.BULK.rank].waiting for s in samples] == [9, 12, 15]


async def test_a_failed_read_leaves_a_gap_not_an_empty_queue() -> None:
    queue = _Queue()
    history = history_of(queue, FakeClock())
    await history.sample()
    queue.failing = True
    assert await history.sample() is None
    assert len(history.samples()) == 1


async def test_the_document_gives_one_column_per_figure_and_class() -> None:
    history = history_of(_Queue(), FakeClock(wall=100.0))
    await history.sample()
    await history.sample()
    document = history_document(history)
    assert document["recording"] is True
    assert document["at"] == [100.0, 100.0]
    classes = document["classes"]
    assert isinstance(classes, dict)
    assert classes["release"] == {
        "waiting": [2, 4],
        "active": [1, 1],
        "oldestWaitSeconds": [1.5, 3.0],
    }
    assert history_document(None)["recording"] is False


async def test_run_samples_at_once_and_then_every_interval() -> None:
    queue = _Queue()
    waited: list[float] = []

    async def sleep(seconds: float) -> None:
        waited.append(seconds)
        if len(waited) == 3:
            raise anyio.get_cancelled_exc_class()()

    history = QueueHistory(cast(DownloadScheduler, queue), interval=10.0, sleep=sleep)
    with pytest.raises(anyio.get_cancelled_exc_class()):
        await history.run()
    assert waited == [10.0, 10.0, 10.0]
    assert queue.calls == 3


def test_an_hour_by_default_and_nonsense_is_refused() -> None:
    assert HISTORY_SAMPLE_SECONDS * HISTORY_SAMPLES == 3600
    queue = cast(DownloadScheduler, _Queue())
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="interval"):
            QueueHistory(queue, interval=bad)
    for points in (0, True, 100_001):
        with pytest.raises(ValueError, match="points"):
            QueueHistory(queue, points=points)
