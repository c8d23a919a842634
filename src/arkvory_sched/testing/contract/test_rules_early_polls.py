"""Early polls (issue #26, ADR 0029) on every implementation.

A protocol client (one with a download id) that asks well before the ``checkAt`` it
was given is told the same again: its place, its start and interval, its ``checkAt``
and ticket, and the ``Retry-After`` left until then. It never loses its place for
asking early, and its first poll at ``checkAt`` is decided as always. A newcomer's
first poll (its first answer has no place), a waiter marked for a free slot (it takes
the slot), a poll with another ticket, a request without an id (held by the server,
which must notice a free slot at once) and the first poll after a settings change are
decided anew.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from arkvory_sched import Admitted, DownloadRequest, DownloadScheduler, Interrupted, Queued
from arkvory_sched.policy import EARLY_POLL_MIN_SECONDS
from arkvory_sched.testing import FakeClock, MakeScheduler, contract_settings

from ._requests import admitted, big, queued

pytestmark = pytest.mark.anyio


async def busy(make_scheduler: MakeScheduler) -> tuple[DownloadScheduler, FakeClock, Admitted]:
    """Both slots held by long downloads on a configured link: whoever comes next
    waits for minutes. The first holder's grant is returned, for a test that lets it go."""
    clock = FakeClock()
    scheduler = await make_scheduler(contract_settings(bandwidth=100 * 1024**2), clock=clock)
    holder = await admitted(scheduler, big("holder-1", "dl-h1", size=64 * 1024**3))
    await admitted(scheduler, big("holder-2", "dl-h2", size=64 * 1024**3))
    return scheduler, clock, holder


async def poll(scheduler: DownloadScheduler, request: DownloadRequest, answer: Queued) -> Queued:
    """The request again with the ticket of ``answer``, as a protocol client asks."""
    return await queued(scheduler, replace(request, ticket=answer.ticket))


def as_told_again(early: Queued, told: Queued, seconds_left: float) -> None:
    assert early.position == told.position
    assert early.starts_at == told.starts_at
    assert (early.starts_earliest, early.starts_latest) == (
        told.starts_earliest,
        told.starts_latest,
    )
    assert early.check_at == told.check_at
    assert early.ticket == told.ticket
    assert early.download_class == told.download_class
    assert early.retry_after == max(1, math.ceil(seconds_left))


async def test_an_early_poll_is_told_the_same_with_the_time_left(
    make_scheduler: MakeScheduler,
) -> None:
    scheduler, clock, _ = await busy(make_scheduler)
    waiter = big("ci-bot", "dl-waiter")
    newcomer = await queued(scheduler, waiter)
    clock.advance(0.5)
    await scheduler.tick()
    # A newcomer's first answer has no place: its next poll is decided, early or not.
    told = await poll(scheduler, waiter, newcomer)
    assert told.position == 1
    wait = told.check_at - clock.wall()
    assert wait > 2 * EARLY_POLL_MIN_SECONDS
    for _ in range(20):  # a script in a loop, twenty times a second
        clock.advance(0.05)
        as_told_again(await poll(scheduler, waiter, told), told, told.check_at - clock.wall())
    clock.advance(told.check_at - clock.wall())
    await scheduler.tick()
    again = await poll(scheduler, waiter, told)  # at checkAt: decided as always
    assert again.position == 1  # it kept its place
    assert again.check_at > told.check_at


async def test_a_waiter_marked_for_a_free_slot_takes_it_however_early(
    make_scheduler: MakeScheduler,
) -> None:
    scheduler, clock, holder = await busy(make_scheduler)
    waiter = big("ci-bot", "dl-waiter")
    newcomer = await queued(scheduler, waiter)
    clock.advance(2.0)
    await scheduler.tick()
    told = await poll(scheduler, waiter, newcomer)
    clock.advance(0.1)
    as_told_again(await poll(scheduler, waiter, told), told, told.check_at - clock.wall())
    await scheduler.report(holder.grant, Interrupted())  # the holder gives up its slot
    clock.advance(31.0)  # idle past idleSeconds: the tick frees the slot and marks
    await scheduler.tick()
    assert told.check_at - clock.wall() > 2 * EARLY_POLL_MIN_SECONDS  # still early
    await admitted(scheduler, replace(waiter, ticket=told.ticket))


async def test_another_ticket_no_id_or_new_settings_are_decided_anew(
    make_scheduler: MakeScheduler,
) -> None:
    scheduler, clock, _ = await busy(make_scheduler)
    waiter = big("ci-bot", "dl-waiter")
    newcomer = await queued(scheduler, waiter)
    clock.advance(2.0)
    await scheduler.tick()
    told = await poll(scheduler, waiter, newcomer)
    clock.advance(0.1)
    stale = await poll(scheduler, waiter, newcomer)  # the newcomer's ticket, not the last
    assert stale.check_at != told.check_at
    clock.advance(0.1)
    await scheduler.configure(contract_settings(aging_minutes=5.0))
    clock.advance(0.1)
    reconfigured = await poll(scheduler, waiter, stale)
    assert reconfigured.check_at != stale.check_at

    link = big("ci-bot", None, object_id="releases/tool.tar", address="192.0.2.77")
    await queued(scheduler, link)  # a link's download: no id, keyed by address
    clock.advance(2.0)
    await scheduler.tick()
    placed = await queued(scheduler, link)
    clock.advance(0.1)
    assert (await queued(scheduler, link)).check_at != placed.check_at
