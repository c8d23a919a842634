"""Early polls cost the shared database nothing (issue #26, ADR 0029).

A script that ignores ``Retry-After`` and polls in a loop with its download id is
answered by the process from the answer it gave last: no statement of its own reaches
PostgreSQL until the poll is due (the process reads the marks with its snapshot, at
most once a half second for all its polls), and the poll at ``checkAt`` is decided by
the database as always.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from arkvory_sched import Admitted, Queued
from arkvory_sched.postgres import _sql as sql
from arkvory_sched.testing import FakeClock
from tests.postgres._helpers import FLEET_SETTINGS, Connect, download, statements_sent

pytestmark = pytest.mark.anyio


async def test_a_poll_in_a_loop_sends_no_statement_until_it_is_due(connect: Connect) -> None:
    clock = FakeClock()
    scheduler = await connect(clock=clock, settings=FLEET_SETTINGS)
    for holder in ("holder-1", "holder-2"):  # long downloads: the waiter is told minutes
        request = replace(download(holder, f"dl-{holder}"), object_size=64 * 1024**3)
        assert isinstance(await scheduler.admit(request), Admitted)
    waiter = download("ci-bot", "dl-waiter")
    newcomer = await scheduler.admit(waiter)
    assert isinstance(newcomer, Queued)
    clock.advance(2.0)
    await scheduler.tick()
    told = await scheduler.admit(replace(waiter, ticket=newcomer.ticket))
    assert isinstance(told, Queued) and told.position == 1
    polling = replace(waiter, ticket=told.ticket)
    with statements_sent() as sent:
        for _ in range(100):
            clock.advance(0.01)
            early = await scheduler.admit(polling)
            assert isinstance(early, Queued) and early.check_at == told.check_at
    # No statement of their own: the marks this process knows, read at most once a
    # half second of queue time for all its polls, are all they need.
    snapshot = " ".join(sql.QUEUE_SNAPSHOT.split())
    assert set(sent) <= {snapshot} and len(sent) <= 3, sent
    clock.advance(told.check_at - clock.wall())
    with statements_sent() as sent:
        due = await scheduler.admit(polling)
    assert isinstance(due, Queued) and due.position == 1
    assert sent  # decided by the database
