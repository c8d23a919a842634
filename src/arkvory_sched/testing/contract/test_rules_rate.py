"""The rate behind every estimate, and slots that never idle while someone waits, on
every implementation (issue #28, ADR 0034).

* A reading counts only when it says something: one tiny read does not make the link
  a 1 KiB/s link, and a start is not announced hours away because of it.
* A slot held by a client that takes far less than its share frees at that client's
  pace, and the others share the rest of the link (``policy.slot_shares``).
* A configured rate is raised by a reading of a full span of seconds, never by one
  busy second (a shaper's first burst).
* A cold server answers from the configured link rate; with none configured, from a
  guess that says what it is worth: its interval contains the real start whenever the
  link carries between :data:`~arkvory_sched.policy.FALLBACK_RATE` divided and
  multiplied by :data:`~arkvory_sched.policy.UNKNOWN_RATE_SPREAD` (4 to 256 MiB/s), and
  the waiter asks again within :data:`~arkvory_sched.policy.UNKNOWN_RATE_CHECK_SECONDS`.
* A waiter of the next round is asked back no later than the optimistic end of its
  interval, and a slot left free past the idle grace goes to the first eligible
  waiter that comes; while its slot may free within the hold, it is held at the door
  (R-HOLD-2). A free slot is kept for a marked waiter not yet back only while it is
  due before the next slot frees.

Stores may read the rate at the tick (PostgreSQL's leader): each test ticks as time
passes, as a running server does.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from arkvory_sched import ByteRange, Delivered, Queued, RangeKind
from arkvory_sched.policy import IDLE_SLOT_GRACE_SECONDS, UNKNOWN_RATE_CHECK_SECONDS
from arkvory_sched.testing import FakeClock, MakeScheduler, contract_settings

from ._requests import (
    KIB,
    MARKED_PAIR_RATE,
    MIB,
    admitted,
    big,
    four_busy_seconds,
    marked_pair_as_a_slot_frees,
    queued,
)

pytestmark = pytest.mark.anyio


def _wait(answer: Queued, clock: FakeClock) -> float:
    return answer.starts_at - clock.wall()


async def test_a_tiny_read_does_not_push_a_start_hours_away(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """Nothing configured; the only reading is one 1 KiB range. Read as a rate it would
    say 1 KiB/s, and the waiter's 40 MiB would start in half a day."""
    scheduler = await make_scheduler(contract_settings(sessions=1))
    first_kib = ByteRange(0, KIB, RangeKind.BOUNDED)
    holder = await admitted(scheduler, big("sdk", "dl-h", byte_range=first_kib))
    clock.advance(0.2)
    await scheduler.report(holder.grant, Delivered(first_kib))  # it holds its slot on
    waiter = big("curl", None)
    await queued(scheduler, waiter)
    for _ in range(6):  # the slot busy, a waiter present, ticks as a server runs them
        clock.advance(1.0)
        await scheduler.tick()
    answer = await queued(scheduler, waiter)
    assert _wait(answer, clock) < 60.0, f"told to start in {_wait(answer, clock):.0f} s"
    assert answer.retry_after <= UNKNOWN_RATE_CHECK_SECONDS


async def test_a_cold_server_answers_from_the_configured_rate(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """The link is configured at 1 MiB/s and nothing is measured yet: the first answer
    with a place comes from that rate, not from a guess of a fast link ("start in 1 s"),
    and its interval contains the real start."""
    rate = 1 * MIB
    scheduler = await make_scheduler(contract_settings(sessions=1, bandwidth=rate))
    holder = await admitted(scheduler, big("curl", None, size=50 * rate))  # 50 s of link
    waiter = big("wget", None, address="192.0.2.11")
    await queued(scheduler, waiter)
    clock.advance(2.0)
    await scheduler.tick()  # the GET has not reported a byte yet: nothing is measured
    answer = await queued(scheduler, waiter)
    real_start = clock.wall() + 48.0
    assert answer.starts_earliest <= real_start <= answer.starts_latest, (
        answer.starts_earliest - clock.wall(),
        answer.starts_latest - clock.wall(),
    )
    assert answer.starts_latest - answer.starts_earliest < 0.3 * 48.0  # a real promise
    assert not answer.guessed
    await scheduler.report(holder.grant, Delivered(None))


async def test_one_busy_second_above_the_configured_rate_does_not_raise_it(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """Told 16 MiB/s, the link's first seconds carry 16, 24 (a shaper's first burst),
    16 and 16 MiB: the rate stays the configured one, and the waiter behind 35.5 s of
    the holder's bytes is told so, not 28 s. Only a full span of faster seconds says
    the link is faster than configured (ADR 0034, point 15)."""
    rate = 16 * MIB
    scheduler = await make_scheduler(contract_settings(sessions=1, bandwidth=rate))
    holder = await admitted(scheduler, big("curl", None, size=40 * rate))  # 40 s of link
    waiter = big("wget", None, address="192.0.2.11")
    await queued(scheduler, waiter)
    await scheduler.tick()  # the slots are busy from here on: someone waits
    for carried in (rate, rate * 3 // 2, rate, rate):
        clock.advance(1.0)
        await scheduler.progress(holder.grant, carried)
        await scheduler.tick()
    told = _wait(await queued(scheduler, waiter), clock)
    assert told >= 33.5, f"told {told:.1f} s for 35.5 s of the configured link"
    for _ in range(8):  # a full span of seconds at 24 MiB/s: the link is faster
        clock.advance(1.0)
        await scheduler.progress(holder.grant, rate * 3 // 2)
        await scheduler.tick()
    told = _wait(await queued(scheduler, waiter), clock)
    assert told <= 18.0, f"told {told:.1f} s for 23.5 s of the configured link at 1.5 times"
    await scheduler.report(holder.grant, Delivered(None))


async def test_slots_taken_since_the_last_tick_are_not_announced_free(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """The last tick saw every slot free; both filled before the next. The waiter who
    comes then starts when a holder ends, 20 s on: it is not told "now" (issue #28: a
    cold server's first waiters were told a start 2 s before their slot freed)."""
    rate = 2 * MIB  # each holder gets half: 1 MiB/s, 20 s for 20 MiB
    scheduler = await make_scheduler(contract_settings(sessions=2, bandwidth=rate))
    await scheduler.tick()
    holders = [big(f"holder-{n}", f"dl-h{n}", size=20 * MIB) for n in range(2)]
    for holder in holders:
        await admitted(scheduler, holder)
    answer = await queued(scheduler, big("waiter", "dl-w", size=20 * MIB))
    real_start = clock.wall() + 20.0
    assert answer.starts_earliest <= real_start <= answer.starts_latest, (
        answer.starts_earliest - clock.wall(),
        answer.starts_latest - clock.wall(),
    )
    assert abs(_wait(answer, clock) - 20.0) <= 2.0, _wait(answer, clock)


async def test_a_slot_held_by_a_slow_client_frees_at_its_pace_and_the_others_sooner(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """Two slots of a 10 MiB/s link: one client takes 1 MiB/s (``curl --limit-rate``),
    the other the other nine. Read at equal shares, the fast download ends 5.6 s later
    than it does, and the slow one 78 s sooner; the waiter starts when the fast one
    ends (issue #28: a crowd with a tenth of its clients slow started its waiters up to
    3 s before they were told)."""
    link = 10 * MIB
    scheduler = await make_scheduler(contract_settings(sessions=2, bandwidth=link))
    slow = await admitted(scheduler, big("slow", None, size=100 * MIB))
    fast = await admitted(scheduler, big("fast", None, size=90 * MIB, address="192.0.2.11"))
    waiter = big("waiter", "dl-w", size=40 * MIB)
    told = await queued(scheduler, waiter)
    for _ in range(6):  # three seconds, reported every half second, ticked as a server runs
        clock.advance(0.5)
        await scheduler.progress(slow.grant, MIB // 2)
        await scheduler.progress(fast.grant, 9 * MIB // 2)
        await scheduler.tick()
    answer = await queued(scheduler, replace(waiter, ticket=told.ticket))
    # The fast download's 63 MiB left at 9 MiB/s: 7 s (equal shares: 12.6 s).
    assert abs(_wait(answer, clock) - 7.0) <= 1.0, _wait(answer, clock)
    for holder in (slow, fast):
        await scheduler.report(holder.grant, Delivered(None))


async def test_a_cold_server_without_a_configured_rate_states_a_wide_interval_then_measures(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """Nothing configured, nothing measured: the first answer's interval contains the real
    start of a 16 MiB/s link and the waiter comes back soon; after a few busy seconds
    the rate is read and the interval is the narrow one of a known rate."""
    link = 16 * MIB
    scheduler = await make_scheduler(contract_settings(sessions=1))
    holder = await admitted(scheduler, big("curl", None, size=10 * link))  # 10 s of link
    waiter = big("wget", None, address="192.0.2.11")
    await queued(scheduler, waiter)
    for _ in range(2):  # the GET has not reported a byte yet: nothing is measured
        clock.advance(1.0)
        await scheduler.tick()
    first = await queued(scheduler, waiter)
    real_start = clock.wall() + 8.0
    assert first.starts_earliest <= real_start <= first.starts_latest, (
        first.starts_earliest - clock.wall(),
        first.starts_latest - clock.wall(),
    )
    assert first.retry_after <= UNKNOWN_RATE_CHECK_SECONDS
    assert first.guessed  # and says so (ADR 0042)
    await four_busy_seconds(scheduler, clock, holder, link)
    later = await queued(scheduler, waiter)
    real_start = clock.wall() + 4.0
    assert later.starts_earliest <= real_start <= later.starts_latest
    assert later.starts_latest - later.starts_earliest <= 4.5  # ±2 s: the rate is known
    assert not later.guessed
    await scheduler.report(holder.grant, Delivered(None))


async def test_a_guessed_start_is_not_scored_the_first_start_told_on_a_rate_is(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """R-EST-4 with nothing configured (ADR 0042): the answer on the guess, 5 s off the
    real start of a 16 MiB/s link, says it is a guess and is not scored; the waiter's
    next answer, on the measured rate, is the one its start is judged against."""
    link = 16 * MIB
    scheduler = await make_scheduler(contract_settings(sessions=1))
    holder = await admitted(scheduler, big("curl", None, size=10 * link))  # 10 s of link
    waiter = big("wget", None, address="192.0.2.11")
    await queued(scheduler, waiter)
    for _ in range(2):
        clock.advance(1.0)
        await scheduler.tick()
    guess = await queued(scheduler, waiter)
    assert guess.guessed
    assert abs(guess.starts_at - (clock.wall() + 8.0)) > 2.0  # the guess is off
    await four_busy_seconds(scheduler, clock, holder, link)
    told = await queued(scheduler, waiter)
    assert not told.guessed
    clock.advance(4.0)  # the holder's last bytes go out at the link's rate
    await scheduler.progress(holder.grant, 4 * link)
    await scheduler.report(holder.grant, Delivered(None))
    await admitted(scheduler, waiter)
    accuracy = (await scheduler.stats()).estimate_accuracy
    assert accuracy.scored == 1
    assert accuracy.absolute_error_seconds.total == pytest.approx(
        abs(clock.wall() - told.starts_at), abs=1e-3
    )
    assert accuracy.absolute_error_seconds.total < 1.0


async def test_the_next_round_is_asked_back_by_the_earliest_start(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """Two slots free in about 3 s: the two waiters who will take them are asked back by
    the optimistic end of their intervals, so neither arrives after its slot freed.
    (An invariant: the marking of slots that finish soon asks them back within a
    second as well; the bound holds whatever marks a store makes.)"""
    rate = 64 * MIB  # each holder gets half: 32 MiB/s
    scheduler = await make_scheduler(contract_settings(bandwidth=rate))
    await admitted(scheduler, big("holder-1", "dl-h1", size=96 * MIB))  # ends in 3 s
    await admitted(scheduler, big("holder-2", "dl-h2", size=112 * MIB))  # ends in 3.5 s
    waiters = [big(f"waiter-{n}", f"dl-w{n}", size=400 * MIB) for n in range(3)]
    first = [await queued(scheduler, waiter) for waiter in waiters]
    await scheduler.tick()
    for waiter, told in zip(waiters[:2], first[:2], strict=True):
        answer = await queued(scheduler, replace(waiter, ticket=told.ticket))
        assert answer.position is not None and answer.position <= 2
        assert answer.check_at <= max(clock.wall() + 1.0, answer.starts_earliest) + 1e-6, (
            answer.check_at - clock.wall(),
            answer.starts_earliest - clock.wall(),
        )


async def test_a_slot_left_free_goes_to_the_first_eligible_waiter_that_comes(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """Three slots; one frees and the tick marks the first two waiters, who do not come.
    The third, unmarked but of the next round (fewer waiters ahead than slots), comes:
    before the idle grace it waits, after it takes the slot. The fourth, further back,
    never takes it: it would start before waiters the order promised it to."""
    scheduler = await make_scheduler(
        contract_settings(sessions=3, max_downloads=3, bandwidth=64 * MIB)
    )
    holders = [  # long downloads: no slot but the one freed here is about to free
        await admitted(scheduler, big(f"holder-{n}", f"dl-h{n}", size=64 * 1024 * MIB))
        for n in range(3)
    ]
    waiters = [big(f"waiter-{n}", f"dl-w{n}") for n in range(4)]
    told = [await queued(scheduler, waiter) for waiter in waiters]
    await scheduler.tick()
    clock.advance(0.1)
    told = [
        await queued(scheduler, replace(waiter, ticket=answer.ticket))
        for waiter, answer in zip(waiters, told, strict=True)
    ]
    assert [answer.position for answer in told] == [1, 2, 3, 4]
    clock.advance(0.1)
    await scheduler.report(holders[0].grant, Delivered(None))  # a slot frees now
    clock.advance(0.3)
    await scheduler.tick()  # sees it idle; marks the first two (a back-up behind the first)
    third = replace(waiters[2], ticket=told[2].ticket)
    fourth = replace(waiters[3], ticket=told[3].ticket)
    clock.advance(0.5)
    await queued(scheduler, third)  # within the grace: the marked ones may still come
    clock.advance(IDLE_SLOT_GRACE_SECONDS)
    await scheduler.tick()
    await queued(scheduler, fourth)  # past the grace, but not of the next round
    await admitted(scheduler, third)


async def test_only_the_next_round_whose_slot_may_free_within_the_hold_is_at_the_door(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """R-HOLD-2: a waiter with a download id is held by the middleware while it is at
    the door: placed in the next round, its start possibly within the hold; a newcomer
    as well (issue #28: told to come back in 2 s, it left a slot that freed meanwhile
    empty). A waiter a round further back is told when to come back at once."""
    rate = 64 * MIB
    settings = contract_settings(sessions=2, bandwidth=rate, hold_seconds=20.0)
    scheduler = await make_scheduler(settings)
    await admitted(scheduler, big("holder-1", "dl-h1", size=96 * MIB))  # ends in 3 s
    await admitted(scheduler, big("holder-2", "dl-h2", size=112 * MIB))  # ends in 3.5 s
    await scheduler.tick()  # as a running server's within half a second: the holders known
    waiters = [big(f"waiter-{n}", f"dl-w{n}", size=2048 * MIB) for n in range(3)]
    first = [await queued(scheduler, waiter) for waiter in waiters]
    assert [answer.at_the_door for answer in first] == [True, True, False]  # newcomers
    await scheduler.tick()
    again = [
        await queued(scheduler, replace(waiter, ticket=told.ticket))
        for waiter, told in zip(waiters, first, strict=True)
    ]
    assert [answer.position for answer in again] == [1, 2, 3]
    assert [answer.at_the_door for answer in again] == [True, True, False]
    assert again[0].starts_earliest - clock.wall() <= settings.hold_seconds


@pytest.mark.parametrize("next_ends_in", [0.5, 3.0], ids=["before-it-is-due", "after"])
async def test_a_marked_waiter_keeps_a_free_slot_only_if_due_before_the_next_one_frees(
    make_scheduler: MakeScheduler, clock: FakeClock, next_ends_in: float
) -> None:
    """Three slots, two finishing soon; the tick marks the first two waiters for them,
    and each is asked back in a second. The first slot frees and the second marked
    waiter comes at once, the first one not yet. When the next slot frees in half a
    second, before the first is due, the second takes this one: the first finds the
    next one there when it comes, and no slot waits empty for it. When the next one
    frees after the first is due, the free slot stays the first's, as the order
    promised."""
    settings = contract_settings(sessions=3, max_downloads=3, bandwidth=MARKED_PAIR_RATE)
    scheduler = await make_scheduler(settings)
    pair = await marked_pair_as_a_slot_frees(scheduler, clock, next_ends_in)
    assert all(0.9 <= seconds <= 1.1 for seconds in pair.due), pair.due
    first, second = pair.waiters
    if next_ends_in < pair.due[0]:
        await admitted(scheduler, second)
    else:
        await queued(scheduler, second)
        await admitted(scheduler, first)
