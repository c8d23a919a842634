"""On the shared queue a free slot is kept for a marked waiter not yet back only if the
next slot frees a slack after it is back (ADR 0043, ``NEXT_SLOT_SLACK_SECONDS``).

Three slots, one free; two marked waiters; the first asleep, due back 0.8 s from now
(its ``checkAt`` and its ``Retry-After`` are written into its row, so the test does not
hang on the jitter of a check delay); the next slot frees at the share of the rate of a
running session. The second waiter, here now, takes the free slot when the next one
frees less than the slack after the first is back; otherwise the slot stays the first's.
"""

from __future__ import annotations

from dataclasses import replace

import asyncpg
import pytest

from arkvory_sched import Delivered
from arkvory_sched.policy import NEXT_SLOT_SLACK_SECONDS
from arkvory_sched.testing import FakeClock, contract_settings
from arkvory_sched.testing.contract._requests import admitted, big, queued
from tests.postgres._helpers import MIB, Connect

pytestmark = pytest.mark.anyio

BACK_IN = 0.8  # the first marked waiter is due back this long after the slot frees
RATE = 192 * MIB  # three holders: 64 MiB/s each; two: 96 MiB/s each


@pytest.mark.parametrize(
    ("next_frees_in", "second_takes_it"),
    [
        (BACK_IN + NEXT_SLOT_SLACK_SECONDS / 2, True),  # kept, it idled until the first came
        (BACK_IN + NEXT_SLOT_SLACK_SECONDS * 2, False),
    ],
)
async def test_a_slot_is_kept_for_a_sleeper_only_if_the_next_frees_a_slack_after_it_is_back(
    connect: Connect, db: asyncpg.Connection, next_frees_in: float, second_takes_it: bool
) -> None:
    clock = FakeClock()
    settings = contract_settings(sessions=3, max_downloads=3, bandwidth=RATE)
    scheduler = await connect(clock=clock, settings=settings)
    holders = [
        await admitted(scheduler, big("holder-0", "dl-h0", size=32 * MIB)),
        await admitted(scheduler, big("holder-1", "dl-h1", size=round(next_frees_in * 96 * MIB))),
        await admitted(scheduler, big("holder-2", "dl-h2", size=64 * 1024 * MIB)),
    ]
    waiters = [big(f"waiter-{n}", f"dl-w{n}", size=400 * MIB) for n in range(2)]
    first = [await queued(scheduler, waiter) for waiter in waiters]
    await scheduler.tick()  # marks both
    clock.advance(0.1)
    told = [
        await queued(scheduler, replace(waiter, ticket=answer.ticket))
        for waiter, answer in zip(waiters, first, strict=True)
    ]
    assert [answer.position for answer in told] == [1, 2]
    clock.advance(0.1)
    await scheduler.report(holders[0].grant, Delivered(None))  # a slot frees now
    back = clock.monotonic() + BACK_IN
    await db.execute(
        "UPDATE download_session SET check_at = $1, back_at = $1 WHERE principal = 'waiter-0'",
        back,
    )
    second = replace(waiters[1], ticket=told[1].ticket)
    if second_takes_it:
        await admitted(scheduler, second)
    else:
        await queued(scheduler, second)
        clock.advance(BACK_IN)
        await admitted(scheduler, replace(waiters[0], ticket=told[0].ticket))
