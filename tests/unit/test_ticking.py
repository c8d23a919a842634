"""The tick loop: its pacing and its survival of a failing tick."""

from __future__ import annotations

import anyio
import pytest

from arkvory_sched import InMemoryDownloadScheduler, SchedulerSettings, TickReport
from arkvory_sched._ticking import BASE_TICK_SECONDS, next_tick_delay, run_tick_loop

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_a_slow_tick_spaces_the_next_one_tenfold() -> None:
    assert next_tick_delay(0.001) == BASE_TICK_SECONDS
    assert next_tick_delay(0.2) == pytest.approx(2.0)


class FlakyScheduler(InMemoryDownloadScheduler):
    """Raises on chosen ticks, like a scheduler whose storage failed unexpectedly."""

    def __init__(self, failing: set[int]) -> None:
        super().__init__(SchedulerSettings())
        self.failing = failing
        self.ticks = 0

    async def tick(self) -> TickReport:
        self.ticks += 1
        if self.ticks in self.failing:
            raise RuntimeError("unexpected failure inside tick")
        return await super().tick()


async def test_the_loop_logs_a_failing_tick_and_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    scheduler = FlakyScheduler(failing={2, 3})
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 5:
            raise anyio.get_cancelled_exc_class()()

    with pytest.raises(anyio.get_cancelled_exc_class()):
        await run_tick_loop(scheduler, sleep=sleep)
    assert scheduler.ticks == 5, "ticks 4 and 5 ran after two failures"
    assert sleeps[1:3] == [BASE_TICK_SECONDS, BASE_TICK_SECONDS]
    assert sum("tick failed" in record.getMessage() for record in caplog.records) == 2
