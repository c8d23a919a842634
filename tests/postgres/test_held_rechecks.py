"""A request held further back than the door reads the shared queue at most twice a
second (ADR 0040), while one at the door is woken by every change made here.

Each look of a held request is an admission's statements. Woken by every range report,
the third-party tools held at three processes' doors asked the database 420 times a
second while a crowd arrived, and the link's responses went without the CPU.

The periodic re-check is pushed out of the tests' reach, so a wait that ends before
it ended because of the change; the half second is a lower bound, which no machine's
speed can shorten.
"""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import pytest

from arkvory_sched import Admitted, ByteRange, Delivered, RangeKind
from arkvory_sched.postgres import _running as running_module
from arkvory_sched.postgres._running import HELD_RECHECK_SECONDS
from tests.postgres._helpers import MIB, Connect, download

pytestmark = pytest.mark.anyio

NEVER = 60.0  # the periodic re-check, pushed out of the test's reach
SIGNALLED = 10.0  # a change wakes within the half second: this bound only catches none
EARLY = 0.01  # the event loop's clock may fire a deadline this much early


@pytest.fixture(autouse=True)
def no_periodic_recheck(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(running_module, "OTHER_PROCESSES_RECHECK_SECONDS", NEVER)
    yield


async def test_range_reports_wake_a_held_request_once_its_half_second_is_over(
    connect: Connect,
) -> None:
    scheduler = await connect()
    first = ByteRange(0, MIB, RangeKind.BOUNDED)
    holder = await scheduler.admit(download("holder", "dl-holder", first))
    assert isinstance(holder, Admitted), holder
    door = anyio.Event()
    held_for: list[float] = []

    async def held_further_back() -> None:
        started = anyio.current_time()
        await scheduler.wait_for_change(NEVER)
        held_for.append(anyio.current_time() - started)

    async def at_the_door() -> None:
        await scheduler.wait_at_the_door(NEVER)
        door.set()

    with anyio.fail_after(SIGNALLED):
        async with anyio.create_task_group() as group:
            group.start_soon(held_further_back)
            group.start_soon(at_the_door)
            await anyio.wait_all_tasks_blocked()
            # A range of a session that goes on: no slot frees, the queue is read anew.
            await scheduler.report(holder.grant, Delivered(first))
            await anyio.wait_all_tasks_blocked()
            assert door.is_set(), "the request at the door was not woken by the change"
    assert held_for and held_for[0] >= HELD_RECHECK_SECONDS - EARLY, held_for


async def test_closing_wakes_a_held_request_at_once(connect: Connect) -> None:
    scheduler = await connect()
    held_for: list[float] = []

    async def held_further_back() -> None:
        started = anyio.current_time()
        await scheduler.wait_for_change(NEVER)
        held_for.append(anyio.current_time() - started)

    with anyio.fail_after(SIGNALLED):
        async with anyio.create_task_group() as group:
            group.start_soon(held_further_back)
            await anyio.wait_all_tasks_blocked()
            await scheduler.close()
            await anyio.wait_all_tasks_blocked()
            assert held_for, "closing did not wake the held request"
