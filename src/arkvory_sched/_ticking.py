"""The scheduler's single periodic task (R-RES-2).

There is no timer per session: one tick every 500 ms does all time-based work. When a
tick itself gets slow (a queue near a million waiters), the next one waits ten times its
duration, so scheduling never takes more than a tenth of the event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import anyio

from ._port import DownloadScheduler

__all__ = ["BASE_TICK_SECONDS", "next_tick_delay", "run_tick_loop"]

log = logging.getLogger("arkvory_sched")

BASE_TICK_SECONDS = 0.5


def next_tick_delay(last_tick_seconds: float) -> float:
    """500 ms, or ten times the last tick's duration when that is longer."""
    return max(BASE_TICK_SECONDS, 10.0 * last_tick_seconds)


async def run_tick_loop(
    scheduler: DownloadScheduler,
    *,
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
) -> None:
    """Tick forever (until cancelled); the caller owns the task (e.g. an ASGI lifespan).

    A tick that raises is logged and the loop goes on: a server whose tick loop died
    would keep answering while nothing expires, frees or marks any more.
    """
    while True:
        try:
            report = await scheduler.tick()
        except Exception:
            log.exception("scheduler tick failed; ticking on")
            await sleep(BASE_TICK_SECONDS)
            continue
        await sleep(report.next_tick_in)
