"""On the shared queue a free slot is kept for a marked waiter not yet back only if the
next slot frees a slack after it is back (ADR 0043, ``NEXT_SLOT_SLACK_SECONDS``).

Three slots, one free; two marked waiters; the first asleep, due back 0.8 s from now
(its ``checkAt`` and its ``Retry-After`` are written into its row, so the test does not
hang on the jitter of a check delay); the next slot frees at the share of the rate of a
running session. The second waiter, here now, takes the free slot when the next one
frees less than the slack after the first is back; otherwise the slot stays the first's.
"""

from __future__ import annotations

import asyncpg
import pytest

from arkvory_sched.policy import NEXT_SLOT_SLACK_SECONDS
from arkvory_sched.testing import FakeClock, contract_settings
from arkvory_sched.testing.contract._requests import (
    MARKED_PAIR_RATE,
    admitted,
    marked_pair_as_a_slot_frees,
    queued,
)
from tests.postgres._helpers import Connect

pytestmark = pytest.mark.anyio

BACK_IN = 0.8  # the first marked waiter is due back this long after the slot frees


@pytest.mark.parametrize(
    ("next_frees_in", "second_takes_it"),
    [
        (BACK_IN + NEXT_SLOT_SLACK_SECONDS / 2, True),  # was kept, idle until the first came
        (BACK_IN + NEXT_SLOT_SLACK_SECONDS * 2, False),
    ],
)
async def test_a_slot_is_kept_for_a_sleeper_only_if_the_next_frees_a_slack_after_it_is_back(
    connect: Connect, db: asyncpg.Connection, next_frees_in: float, second_takes_it: bool
) -> None:
    clock = FakeClock()
    settings = contract_settings(sessions=3, max_downloads=3, bandwidth=MARKED_PAIR_RATE)
    scheduler = await connect(clock=clock, settings=settings)
    pair = await marked_pair_as_a_slot_frees(scheduler, clock, next_frees_in)
    back = clock.monotonic() + BACK_IN
    await db.execute(
        "UPDATE download_session SET check_at = $1, back_at = $1 WHERE principal = 'waiter-0'",
        back,
    )
    first, second = pair.waiters
    if second_takes_it:
        await admitted(scheduler, second)
    else:
        await queued(scheduler, second)
        clock.advance(BACK_IN)
        await admitted(scheduler, first)
