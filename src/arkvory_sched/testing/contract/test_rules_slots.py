"""Who may take a free slot, on every implementation: the interactive reserve
(R-CLASS-3) and the per-principal share with and without contenders (R-CLASS-5)."""

from __future__ import annotations

import pytest

from arkvory_sched import Admitted, DownloadClass, PrincipalKind, Queued
from arkvory_sched.testing import FakeClock, MakeScheduler, contract_settings

from ._requests import admitted, big, deliver, keep_polling, queued, serve_next

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("sessions", "reserve"),
    [
        pytest.param(4, 1, id="four-slots"),
        # With three slots a reserve would give people a third of the link: none.
        pytest.param(3, 0, id="three-slots"),
    ],
)
async def test_interactive_reserve_holds_one_slot_from_four_sessions(
    make_scheduler: MakeScheduler, clock: FakeClock, sessions: int, reserve: int
) -> None:
    """R-CLASS-3: from four slots on, one is kept for ``interactive`` however long
    updates wait for it; a person then starts in it."""
    scheduler = await make_scheduler(
        contract_settings(sessions=sessions, reserve=None, per_principal=sessions)
    )
    assert scheduler.settings.reserve == reserve
    updates = [await admitted(scheduler, big(f"agent-{n}", "dl-a")) for n in range(sessions - 1)]
    agent = big("agent-x", "dl-x")
    first = await scheduler.admit(agent)
    if reserve:
        assert isinstance(first, Queued), first
        await keep_polling(scheduler, clock, [agent], 60.0)
        assert (await scheduler.stats()).active == sessions - 1
        person = big("ann", "dl-p", kind=PrincipalKind.PERSON)
        answer = await scheduler.admit(person)
        if not isinstance(answer, Admitted):  # at once, or on return after the next tick
            clock.advance(0.5)
            await scheduler.tick()
            await queued(scheduler, agent)
            answer = await admitted(scheduler, person)
        assert answer.download_class is DownloadClass.INTERACTIVE
        updates.append(answer)
    else:
        assert isinstance(first, Admitted), first
        updates.append(first)
    assert (await scheduler.stats()).active == sessions
    for decision in updates:
        await deliver(scheduler, decision)


async def test_interactive_may_use_every_slot(make_scheduler: MakeScheduler) -> None:
    """R-CLASS-3: the reserve keeps slots from updates, never from people."""
    scheduler = await make_scheduler(contract_settings(sessions=4, reserve=1, per_principal=4))
    people = [
        await admitted(scheduler, big(f"person-{n}", "dl-p", kind=PrincipalKind.PERSON))
        for n in range(4)
    ]
    assert (await scheduler.stats()).per_class[DownloadClass.INTERACTIVE].active == 4
    for decision in people:
        await deliver(scheduler, decision)


async def test_per_principal_share_holds_only_while_another_principal_waits(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """R-CLASS-5: a principal at its share yields a free slot to another principal's
    waiter that arrived later; with no contender it gets a free slot beyond its share."""
    scheduler = await make_scheduler(contract_settings(sessions=2, per_principal=1))
    # Nobody else waits: the fleet takes both slots, twice its share.
    first = await admitted(scheduler, big("fleet", "dl-1"))
    second = await admitted(scheduler, big("fleet", "dl-2"))
    third = big("fleet", "dl-3")
    await queued(scheduler, third)
    clock.advance(1.0)
    laptop = big("laptop", "dl-l")
    await queued(scheduler, laptop)
    await deliver(scheduler, first)
    # The fleet's waiter came first, but the contender gets the slot.
    waiting = [third, laptop]
    served, contender = await serve_next(scheduler, clock, waiting, complete=False)
    assert served is laptop
    await keep_polling(scheduler, clock, [third], 1.0)
    # The contender is served: nobody else waits, so the fleet may go beyond its share.
    await deliver(scheduler, contender)
    served, beyond = await serve_next(scheduler, clock, waiting, complete=False)
    assert served is third
    assert (await scheduler.stats()).active == 2
    for decision in (second, beyond):
        await deliver(scheduler, decision)


async def test_per_principal_share_is_judged_when_the_marked_waiter_comes(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """R-CLASS-5 at the claim: a waiter marked while nobody contended does not take the
    slot beyond its principal's share once a contender has arrived since the tick; the
    contender is served at the next tick. (The PostgreSQL store once checked the share
    only when marking: the marked waiter took the slot.)"""
    scheduler = await make_scheduler(contract_settings(sessions=2, per_principal=1))
    held = await admitted(scheduler, big("fleet", "dl-1"))
    other = await admitted(scheduler, big("ci", "dl-c"))
    beyond = big("fleet", "dl-2")
    await queued(scheduler, beyond)
    await deliver(scheduler, other)
    clock.advance(0.5)
    await scheduler.tick()  # marks the fleet's waiter: nobody below the share waits
    laptop = big("laptop", "dl-l")
    await queued(scheduler, laptop)  # arrives after the marking: a contender now
    await queued(scheduler, beyond)
    served, contender = await serve_next(scheduler, clock, [beyond, laptop], complete=False)
    assert served is laptop
    for decision in (held, contender):
        await deliver(scheduler, decision)
