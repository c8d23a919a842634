"""Preemption, on every implementation: each condition of R-PREEMPT-1..3.

The textbook case: a protocol client (one with ``Arkvory-Download-Id``) of a lower class
holds the only slot, reading ranges, while a person waits. Ranges are read every 20 s,
well inside ``idleSeconds``, so the holder never pauses; ticks run between them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from arkvory_sched import (
    Admitted,
    DownloadClass,
    DownloadRequest,
    DownloadScheduler,
    PrincipalKind,
    Queued,
)
from arkvory_sched.testing import FakeClock, MakeScheduler, contract_settings

from ._requests import MIB, admitted, big, chunk, deliver, keep_polling, queued, serve_next

pytestmark = pytest.mark.anyio

LARGE = 1024 * MIB  # 128 ranges: reading a few never completes the download


@dataclass
class Reader:
    """A client reading one large object range by range, as the SDK does."""

    principal: str
    download_id: str | None = "dl-r"
    requested_class: str | None = "bulk"
    kind: PrincipalKind = PrincipalKind.SERVICE
    next_index: int = 0
    read: list[int] = field(default_factory=list)

    def request(self, index: int | None = None) -> DownloadRequest:
        return big(
            self.principal,
            self.download_id,
            requested_class=self.requested_class,
            kind=self.kind,
            size=LARGE,
            byte_range=chunk(self.next_index if index is None else index, LARGE),
        )

    async def next_range(self, scheduler: DownloadScheduler) -> Admitted | Queued:
        """Ask for the next range; an admitted one is delivered at once."""
        decision = await scheduler.admit(self.request())
        assert isinstance(decision, Admitted | Queued), decision
        if isinstance(decision, Admitted):
            await deliver(scheduler, decision)
            self.next_index += 1
        return decision


async def _hold(
    scheduler: DownloadScheduler,
    clock: FakeClock,
    readers: list[Reader],
    waiters: list[DownloadRequest],
    seconds: float,
    *,
    every: float = 20.0,
) -> list[bool]:
    """Let up to ``seconds`` pass: every ``every`` seconds the readers read a range (each
    must be admitted), a tick runs and the waiters poll. Stops after the first tick that
    preempted; returns each tick's ``preempted``."""
    preempted: list[bool] = []
    elapsed = 0.0
    while elapsed < seconds:
        for reader in readers:
            assert isinstance(await reader.next_range(scheduler), Admitted)
        step = min(every, seconds - elapsed)
        clock.advance(step)
        elapsed += step
        preempted.append((await scheduler.tick()).preempted)
        if preempted[-1]:
            break
        for waiter in waiters:
            await queued(scheduler, waiter)
    return preempted


def _person(name: str = "ann") -> DownloadRequest:
    return big(name, "dl-p", kind=PrincipalKind.PERSON)


async def _bulk_holds_while_person_waits(
    make_scheduler: MakeScheduler,
    clock: FakeClock,
    *,
    download_id: str | None = "dl-r",
    **changes: object,
) -> tuple[DownloadScheduler, Reader, DownloadRequest]:
    scheduler = await make_scheduler(contract_settings(sessions=1, **changes))
    mirror = Reader("mirror", download_id)
    assert isinstance(await mirror.next_range(scheduler), Admitted)
    person = _person()
    await queued(scheduler, person)
    return scheduler, mirror, person


async def test_preemption_waits_until_the_holder_held_its_slot_a_minute(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """R-PREEMPT-1: a protocol client of a lower class yields only after holding its
    slot for at least one minute."""
    scheduler, mirror, person = await _bulk_holds_while_person_waits(make_scheduler, clock)
    assert await _hold(scheduler, clock, [mirror], [person], 59.0) == [False, False, False]
    assert (await scheduler.stats()).preemptions_total == 0
    clock.advance(2.0)
    assert (await scheduler.tick()).preempted
    assert (await scheduler.stats()).preemptions_total == 1


async def test_preempted_holder_yields_at_its_next_range_boundary(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """R-PREEMPT-1: the holder's next range is answered ``Queued``; the head then takes
    the slot on its next poll."""
    scheduler, mirror, person = await _bulk_holds_while_person_waits(make_scheduler, clock)
    assert not any(await _hold(scheduler, clock, [mirror], [person], 59.0))
    clock.advance(2.0)
    assert (await scheduler.tick()).preempted
    yielded = await mirror.next_range(scheduler)
    assert isinstance(yielded, Queued), yielded
    assert yielded.download_class is DownloadClass.BULK
    started = await admitted(scheduler, person)
    assert started.download_class is DownloadClass.INTERACTIVE
    stats = await scheduler.stats()
    assert (stats.active, stats.waiting) == (1, 1)


@pytest.mark.parametrize(
    ("holder_class", "preempted"),
    [
        pytest.param("bulk", True, id="lower-class"),
        pytest.param(None, False, id="same-class-within-share"),
    ],
)
async def test_preemption_needs_a_lower_class_or_a_holder_above_its_share(
    make_scheduler: MakeScheduler, clock: FakeClock, holder_class: str | None, preempted: bool
) -> None:
    """R-PREEMPT-1: a release head does not take the slot of a release holder that is
    within its share, however long it has held it; a bulk holder's it does take."""
    scheduler = await make_scheduler(contract_settings(sessions=1))
    holder = Reader("mirror", requested_class=holder_class)
    assert isinstance(await holder.next_range(scheduler), Admitted)
    head = big("ci", "dl-c")
    await queued(scheduler, head)
    ticks = await _hold(scheduler, clock, [holder], [head], 180.0)
    assert any(ticks) is preempted
    assert (await scheduler.stats()).preemptions_total == int(preempted)


async def test_preemption_takes_a_slot_from_a_principal_above_its_share(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """R-PREEMPT-1: a principal below its share is a reason to preempt a holder of the
    same class whose principal is above its share."""
    scheduler = await make_scheduler(contract_settings(sessions=2, per_principal=1))
    older = Reader("fleet", "dl-1", requested_class=None)
    younger = Reader("fleet", "dl-2", requested_class=None)
    assert isinstance(await older.next_range(scheduler), Admitted)
    clock.advance(1.0)
    assert isinstance(await younger.next_range(scheduler), Admitted)  # nobody else waits
    laptop = big("laptop", "dl-l")
    await queued(scheduler, laptop)
    ticks = await _hold(scheduler, clock, [older, younger], [laptop], 120.0)
    assert ticks[-1], ticks
    assert (await scheduler.stats()).preemptions_total == 1


async def test_preemption_at_most_one_per_tick(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """R-PREEMPT-2: one yield at a time, however many heads wait behind lower classes."""
    scheduler = await make_scheduler(contract_settings(sessions=2, per_principal=1))
    mirrors = [Reader("mirror-1"), Reader("mirror-2")]
    for mirror in mirrors:
        assert isinstance(await mirror.next_range(scheduler), Admitted)
    people = [_person("ann"), _person("bob")]
    for person in people:
        await queued(scheduler, person)
    ticks = await _hold(scheduler, clock, mirrors, people, 120.0)
    assert ticks[-1], ticks
    # The yield is pending (the holder has not come back yet): no second one.
    for _ in range(5):
        clock.advance(1.0)
        assert not (await scheduler.tick()).preempted
        for person in people:
            await queued(scheduler, person)
    assert (await scheduler.stats()).preemptions_total == 1


async def test_next_preemption_only_after_the_head_got_its_slot(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """R-PREEMPT-2: once the head has the yielded slot, the next tick may ask the next
    holder to yield for the next head."""
    scheduler = await make_scheduler(contract_settings(sessions=2, per_principal=1))
    mirrors = [Reader("mirror-1"), Reader("mirror-2")]
    for mirror in mirrors:
        assert isinstance(await mirror.next_range(scheduler), Admitted)
        clock.advance(1.0)
    people = [_person("ann"), _person("bob")]
    for person in people:
        await queued(scheduler, person)
    assert (await _hold(scheduler, clock, mirrors, people, 120.0))[-1]
    # The longest holder yields; the first head takes its slot.
    answers = [await mirror.next_range(scheduler) for mirror in mirrors]
    assert [type(answer) for answer in answers] == [Queued, Admitted]
    await admitted(scheduler, people[0])
    clock.advance(0.5)
    assert (await scheduler.tick()).preempted
    assert (await scheduler.stats()).preemptions_total == 2


async def test_tools_without_a_download_id_are_never_preempted(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """R-PREEMPT-3: a client without ``Arkvory-Download-Id`` keeps its slot."""
    scheduler, mirror, person = await _bulk_holds_while_person_waits(
        make_scheduler, clock, download_id=None
    )
    ticks = await _hold(scheduler, clock, [mirror], [person], 180.0)
    assert not any(ticks)
    assert (await scheduler.stats()).preemptions_total == 0


async def test_preemption_disabled_by_settings(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """R-PREEMPT-3: ``ARKVORY_DOWNLOAD_PREEMPT=false`` disables preemption."""
    scheduler, mirror, person = await _bulk_holds_while_person_waits(
        make_scheduler, clock, preempt=False
    )
    ticks = await _hold(scheduler, clock, [mirror], [person], 180.0)
    assert not any(ticks)
    assert (await scheduler.stats()).preemptions_total == 0


async def test_yielder_takes_no_slot_while_the_head_it_yielded_to_waits(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """R-PREEMPT-2: asking before the head, the yielder would take the slot back."""
    scheduler, mirror, person = await _bulk_holds_while_person_waits(make_scheduler, clock)
    assert not any(await _hold(scheduler, clock, [mirror], [person], 59.0))
    clock.advance(2.0)
    assert (await scheduler.tick()).preempted
    assert isinstance(await mirror.next_range(scheduler), Queued)  # yields
    assert (await scheduler.stats()).active == 0
    for _ in range(3):
        assert isinstance(await mirror.next_range(scheduler), Queued)
        clock.advance(0.5)
        await scheduler.tick()
    assert isinstance(await mirror.next_range(scheduler), Queued)
    await admitted(scheduler, person)


async def test_preempted_session_restarts_its_aging(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """R-PREEMPT-2, R-STRAT-1: the yielder waits again in its own class without the aging
    it had: it aged into ``release`` while it first waited, yet after the yield a later
    release download goes before it. (The first holder's bulk start leaves bulk behind
    release in the weighted turns, so bulk's lane cannot win on turns alone.)"""
    scheduler = await make_scheduler(contract_settings(sessions=1, aging_minutes=1.0))
    holder = await admitted(scheduler, big("sync", "dl-s", requested_class="bulk"))
    mirror = Reader("mirror")
    await queued(scheduler, mirror.request())
    await keep_polling(scheduler, clock, [mirror.request()], 80.0)  # aged into release
    await deliver(scheduler, holder)
    waiting = [mirror.request()]
    await serve_next(scheduler, clock, waiting)  # its first range, delivered
    mirror.next_index = 1
    person = _person()
    await queued(scheduler, person)
    assert not any(await _hold(scheduler, clock, [mirror], [person], 59.0))
    clock.advance(2.0)
    assert (await scheduler.tick()).preempted
    assert isinstance(await mirror.next_range(scheduler), Queued)  # yields
    started = await admitted(scheduler, person)
    ci = big("ci", "dl-c")
    await queued(scheduler, ci)
    await keep_polling(scheduler, clock, [mirror.request(), ci], 20.0)
    await deliver(scheduler, started)
    served, _grant = await serve_next(scheduler, clock, [mirror.request(), ci])
    assert served is ci
