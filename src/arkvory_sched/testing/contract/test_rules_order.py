"""Who is served next, on every implementation: weights between classes, round-robin
between principals, aging and smallest-first (R-STRAT-1, R-STRAT-2, R-CLASS-2).

The only slot is held by a response in flight; the waiters queue behind it and then the
slot is handed on one grant at a time (:func:`serve_next`), so the order of starts is the
order the queue serves.
"""

from __future__ import annotations

from collections import Counter

import pytest

from arkvory_sched import DownloadClass, DownloadRequest, PrincipalKind, Strategy
from arkvory_sched.testing import FakeClock, MakeScheduler, contract_settings

from ._requests import MIB, admitted, big, deliver, keep_polling, queued, serve_next

pytestmark = pytest.mark.anyio

GIB = 1024 * MIB


def _waiter(cls: DownloadClass, name: str, *, size: int = 40 * MIB) -> DownloadRequest:
    """A download of class ``cls``: people are interactive, services lower theirs."""
    if cls is DownloadClass.INTERACTIVE:
        return big(name, f"dl-{name}", kind=PrincipalKind.PERSON, size=size)
    lowered = None if cls is DownloadClass.RELEASE else cls.value
    return big(name, f"dl-{name}", requested_class=lowered, size=size)


async def test_weights_share_starts_eight_four_two_one(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """R-STRAT-1, R-CLASS-2: with all four classes waiting, every 15 starts split 8:4:2:1."""
    scheduler = await make_scheduler(contract_settings(sessions=1, aging_minutes=0))
    holder = await admitted(scheduler, _waiter(DownloadClass.RELEASE, "holder"))
    class_of: dict[DownloadRequest, DownloadClass] = {}
    # One more of each class than two periods serve: no class ever runs dry.
    for cls, count in zip(DownloadClass, (17, 9, 5, 3), strict=True):
        for index in range(count):
            waiter = _waiter(cls, f"{cls.value}-{index}")
            class_of[waiter] = cls
            await queued(scheduler, waiter)
    waiting = list(class_of)
    await deliver(scheduler, holder)
    starts = [DownloadClass.RELEASE]  # the holder's start took a turn of its class
    for _ in range(29):
        served, _grant = await serve_next(scheduler, clock, waiting)
        starts.append(class_of[served])
    expected = {
        DownloadClass.INTERACTIVE: 8,
        DownloadClass.RELEASE: 4,
        DownloadClass.BULK: 2,
        DownloadClass.BACKGROUND: 1,
    }
    assert Counter(starts[:15]) == expected, starts
    assert Counter(starts[15:30]) == expected, starts
    assert {class_of[waiter] for waiter in waiting} == set(DownloadClass)


async def test_round_robin_between_principals_of_a_class(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """R-STRAT-1: principals of one class take turns; each one's downloads keep their
    arrival order, even when one principal's whole fleet arrived first."""
    scheduler = await make_scheduler(contract_settings(sessions=1))
    holder = await admitted(scheduler, big("holder", "dl-h"))
    fleet = [big("fleet", f"dl-{index}") for index in range(3)]
    laptop = [big("laptop", f"dl-{index}") for index in range(3)]
    for waiter in fleet + laptop:
        await queued(scheduler, waiter)
        clock.advance(0.1)
    await deliver(scheduler, holder)
    waiting = fleet + laptop
    order = [(await serve_next(scheduler, clock, waiting))[0] for _ in range(6)]
    assert order == [fleet[0], laptop[0], fleet[1], laptop[1], fleet[2], laptop[2]]


async def _aging_order(
    make_scheduler: MakeScheduler, clock: FakeClock, *, strategy: Strategy, aging_minutes: float
) -> list[str]:
    """A bulk and a background waiter, then a release one; 150 s later a person comes.
    Returns the principals in the order they start."""
    scheduler = await make_scheduler(
        contract_settings(sessions=1, strategy=strategy, aging_minutes=aging_minutes)
    )
    holder = await admitted(scheduler, _waiter(DownloadClass.BACKGROUND, "holder"))
    mirror = _waiter(DownloadClass.BULK, "mirror")
    sync = _waiter(DownloadClass.BACKGROUND, "sync")
    ci = _waiter(DownloadClass.RELEASE, "ci")
    for waiter in (mirror, sync, ci):
        await queued(scheduler, waiter)
        clock.advance(0.5)
    # Two and a half aging periods of one minute: bulk may climb once, background twice.
    await keep_polling(scheduler, clock, [mirror, sync, ci], 150.0)
    person = _waiter(DownloadClass.INTERACTIVE, "person")
    await queued(scheduler, person)
    await keep_polling(scheduler, clock, [mirror, sync, ci, person], 1.0)
    await deliver(scheduler, holder)
    waiting = [mirror, sync, ci, person]
    return [(await serve_next(scheduler, clock, waiting))[0].principal for _ in range(4)]


@pytest.mark.parametrize(
    ("aging_minutes", "expected"),
    [
        # Aged into release, ahead of the later release waiter; never into interactive.
        pytest.param(1.0, ["person", "mirror", "sync", "ci"], id="aging-on"),
        # agingMinutes = 0 disables aging: class order and weights alone.
        pytest.param(0.0, ["person", "ci", "mirror", "sync"], id="aging-off"),
    ],
)
async def test_aging_moves_a_waiter_one_class_up_but_never_above_release(
    make_scheduler: MakeScheduler, clock: FakeClock, aging_minutes: float, expected: list[str]
) -> None:
    """R-STRAT-1: a waiter older than agingMinutes moves one class up, not above
    ``release`` (a person who came much later still goes first); 0 disables it."""
    order = await _aging_order(
        make_scheduler, clock, strategy=Strategy.ORDERED, aging_minutes=aging_minutes
    )
    assert order == expected


async def test_aging_lifts_a_waiter_under_smallest_first_too(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """R-STRAT-1, R-STRAT-2: smallest-first orders within a class; aging between classes
    still applies (equal sizes here, so only aging can change the order)."""
    order = await _aging_order(
        make_scheduler, clock, strategy=Strategy.SMALLEST_FIRST, aging_minutes=1.0
    )
    assert order == ["person", "mirror", "sync", "ci"]


async def test_smallest_first_serves_smaller_objects_first(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """R-STRAT-2: within a class, smaller objects first (minimum mean completion)."""
    scheduler = await make_scheduler(
        contract_settings(sessions=1, strategy=Strategy.SMALLEST_FIRST, aging_minutes=10.0)
    )
    holder = await admitted(scheduler, big("holder", "dl-h"))
    sizes = [8 * GIB, 1 * GIB, 4 * GIB, 64 * MIB, 2 * GIB]
    waiting = [big(f"user-{index}", "dl-u", size=size) for index, size in enumerate(sizes)]
    for waiter in waiting:
        await queued(scheduler, waiter)
        clock.advance(0.1)
    await deliver(scheduler, holder)
    served = [(await serve_next(scheduler, clock, waiting))[0] for _ in sizes]
    assert [waiter.object_size for waiter in served] == sorted(sizes)


async def test_smallest_first_ages_so_a_large_object_is_not_starved(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """R-STRAT-2: a large object yields only to smaller ones that arrived within
    agingMinutes after it; a small one arriving later than that waits behind it."""
    scheduler = await make_scheduler(
        contract_settings(sessions=1, strategy=Strategy.SMALLEST_FIRST, aging_minutes=1.0)
    )
    holder = await admitted(scheduler, big("holder", "dl-h"))
    large = big("large", "dl-l", size=16 * GIB)
    await queued(scheduler, large)
    await keep_polling(scheduler, clock, [large], 30.0)
    soon = big("soon", "dl-s", size=32 * MIB)  # within the minute: goes first
    await queued(scheduler, soon)
    await keep_polling(scheduler, clock, [large, soon], 40.0)
    later = big("later", "dl-t", size=32 * MIB)  # after the minute: goes after
    await queued(scheduler, later)
    await keep_polling(scheduler, clock, [large, soon, later], 1.0)
    await deliver(scheduler, holder)
    waiting = [later, large, soon]
    order = [(await serve_next(scheduler, clock, waiting))[0] for _ in range(3)]
    assert order == [soon, large, later]
