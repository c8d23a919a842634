"""The slot-count controller (issue #30, ADR 0038): pure, driven by readings."""

from __future__ import annotations

from dataclasses import replace

from arkvory_sched import policy
from arkvory_sched.policy import SizingReason, SlotSizing

STEP_SECONDS, TURN_SECONDS = policy.STEP_SECONDS, policy.TURN_SECONDS

MIB = 1024 * 1024
LINK = 100.0 * MIB


def read(
    now: float,
    delivery: float,
    *,
    active: int,
    waiting: bool = True,
    capacity: float = LINK,
    limited: int = 0,
    since: float = float("-inf"),
) -> policy.SizingReading:
    return policy.SizingReading(now, waiting, active, delivery, capacity, limited, since)


def test_a_spare_link_opens_slots_per_step_while_every_slot_is_held() -> None:
    state = policy.start_sizing(2, 0.0)
    assert (state.count, state.reason) == (2, SizingReason.START)
    # Too soon after the start: nothing moves.
    assert policy.size_slots(state, read(STEP_SECONDS / 2, 0.2 * LINK, active=2), 2, 8).count == 2
    # Two slots carry a fifth of the link, read over seconds since the last step:
    # filling it would take seven more, and a step at most doubles the count.
    up = policy.size_slots(state, read(2.0, 0.2 * LINK, active=2, since=0.0), 2, 8)
    assert (up.count, up.reason) == (4, SizingReason.SPARE)
    # The slots opened are not taken yet: the next step waits for them.
    assert policy.size_slots(up, read(3.0, 0.3 * LINK, active=3, since=2.0), 2, 8).count == 4
    # Four slots at a fifth each: one more is all the room to 90 %; never past the most.
    again = policy.size_slots(up, read(4.0, 0.8 * LINK, active=4, since=2.0), 2, 8)
    assert (again.count, again.reason) == (5, SizingReason.SPARE)
    last = policy.size_slots(up, read(4.0, 0.1 * LINK, active=4, since=2.0), 2, 6)
    assert (last.count, last.reason) == (6, SizingReason.SPARE)


def test_a_reading_partly_from_before_the_last_step_opens_one_slot_at_most() -> None:
    """The seconds read began before the slots last opened: what those carry is not in
    it yet, and a reading that low would open far too many (49 of 64 on PostgreSQL).
    After a spare step it opens none: the step's own reading is a second away."""
    limited = SlotSizing(4, SizingReason.LIMITED, 10.0, raised_at=10.0, direction=+1)
    stale = policy.size_slots(limited, read(11.0, 0.2 * LINK, active=4, since=9.0), 2, 64)
    assert (stale.count, stale.reason) == (5, SizingReason.SPARE)
    spare = SlotSizing(4, SizingReason.SPARE, 10.0, raised_at=10.0, direction=+1)
    held = policy.size_slots(spare, read(11.0, 0.2 * LINK, active=4, since=9.0), 2, 64)
    assert (held.count, held.stepped_at) == (4, 10.0)
    fresh = policy.size_slots(spare, read(12.0, 0.2 * LINK, active=4, since=10.0), 2, 64)
    assert fresh.count == 8


def test_a_spare_step_opens_what_the_held_slots_would_fill_at_least_one() -> None:
    """:func:`spare_slots`: the room up to 90 % at a held slot's delivery, within one
    and the count, never past the maximum; a reading of nothing opens one."""
    assert policy.spare_slots(read(0.0, 0.5 * LINK, active=10), 10, 64) == 8
    assert policy.spare_slots(read(0.0, 0.5 * LINK, active=10), 10, 12) == 2
    assert policy.spare_slots(read(0.0, 0.1 * LINK, active=2), 2, 64) == 2
    assert policy.spare_slots(read(0.0, 0.89 * LINK, active=8), 8, 64) == 1
    assert policy.spare_slots(read(0.0, 0.0, active=3), 3, 64) == 1


def test_nothing_opens_while_a_slot_is_free_or_nobody_waits() -> None:
    state = policy.start_sizing(2, 0.0)
    assert policy.size_slots(state, read(10.0, 0.2 * LINK, active=1), 2, 8).count == 2
    assert (
        policy.size_slots(state, read(10.0, 0.2 * LINK, active=2, waiting=False), 2, 8).count == 2
    )


def test_slots_held_by_limited_clients_open_more_on_a_full_link() -> None:
    """A fast session fills the link beside three slow ones: full, but three of four
    slots carry little and the queue behind them waits; one more slot per step, up to
    the limited ones and the headroom."""
    state = SlotSizing(4, SizingReason.SPARE, 0.0)
    up = policy.size_slots(state, read(10.0, LINK, active=4, limited=3), 2, 8)
    assert (up.count, up.reason) == (5, SizingReason.LIMITED)
    held = policy.size_slots(up, read(20.0, LINK, active=5, limited=3), 2, 8)
    assert held.count == 5  # three limited and two that fill the link


def test_never_above_the_maximum_and_the_reason_says_so() -> None:
    state = SlotSizing(8, SizingReason.SPARE, 0.0)
    held = policy.size_slots(state, read(10.0, 0.5 * LINK, active=8), 2, 8)
    assert (held.count, held.reason) == (8, SizingReason.AT_MAXIMUM)
    # The operator lowers the maximum: the count follows at once (the store takes no
    # slot away: it admits nobody until fewer are held).
    lowered = policy.size_slots(held, read(11.0, 0.5 * LINK, active=8), 2, 5)
    assert (lowered.count, lowered.reason) == (5, SizingReason.AT_MAXIMUM)


def test_a_saturated_link_lets_the_count_fall_as_sessions_finish() -> None:
    state = SlotSizing(6, SizingReason.SPARE, 0.0)
    down = policy.size_slots(state, read(10.0, LINK, active=6), 2, 8)
    assert (down.count, down.reason) == (5, SizingReason.SATURATED)
    # Still six held: no further step until a session has finished.
    assert policy.size_slots(down, read(20.0, LINK, active=6), 2, 8).count == 5
    assert policy.size_slots(down, read(20.0, LINK, active=5), 2, 8).count == 4
    # Never below the minimum.
    floor = SlotSizing(2, SizingReason.SATURATED, 0.0)
    at_min = policy.size_slots(floor, read(10.0, LINK, active=2), 2, 8)
    assert (at_min.count, at_min.reason) == (2, SizingReason.AT_MINIMUM)


def test_a_full_link_keeps_the_slots_of_clients_limited_within_the_last_minute() -> None:
    state = SlotSizing(6, SizingReason.LIMITED, 0.0)
    seen = policy.size_slots(state, read(1.0, LINK, active=6, limited=4), 2, 8)
    assert seen.count == 6  # four limited, two headroom
    # The slow ones are not read for a moment (a fast one came and went): no fall.
    assert policy.size_slots(seen, read(30.0, LINK, active=6, limited=0), 2, 8).count == 6
    assert policy.size_slots(seen, read(62.0, LINK, active=6, limited=0), 2, 8).count == 5


def test_between_spare_and_saturated_the_count_holds() -> None:
    state = SlotSizing(5, SizingReason.SPARE, 0.0)
    assert policy.size_slots(state, read(10.0, 0.93 * LINK, active=5), 2, 8).count == 5


def test_the_count_falls_only_a_minute_after_it_rose() -> None:
    state = policy.start_sizing(2, 0.0)
    up = policy.size_slots(state, read(5.0, 0.5 * LINK, active=2), 2, 8)
    assert up.count == 3
    assert policy.size_slots(up, read(30.0, LINK, active=3), 2, 8).count == 3
    assert policy.size_slots(up, read(5.0 + TURN_SECONDS, LINK, active=3), 2, 8).count == 2


def test_the_count_changes_direction_at_most_once_a_turn_period() -> None:
    risen = SlotSizing(5, SizingReason.SPARE, 0.0, direction=+1)
    down = policy.size_slots(risen, read(TURN_SECONDS, LINK, active=5), 2, 8)
    assert (down.count, down.direction, down.turned_at) == (4, -1, TURN_SECONDS)
    # Spare again at once: a turn back up waits for the turn period.
    assert policy.size_slots(down, read(TURN_SECONDS + 5.0, 0.5 * LINK, active=4), 2, 8).count == 4
    up = policy.size_slots(down, read(2 * TURN_SECONDS, 0.85 * LINK, active=4), 2, 8)
    assert (up.count, up.direction) == (5, +1)


def test_without_a_capacity_only_limited_clients_open_slots() -> None:
    state = policy.start_sizing(2, 0.0)
    assert policy.size_slots(state, read(5.0, 0.1 * LINK, active=2, capacity=0.0), 2, 8).count == 2
    up = policy.size_slots(state, read(5.0, 0.1 * LINK, active=2, capacity=0.0, limited=1), 2, 8)
    assert up.count == 3


def test_limited_clients_are_those_below_half_the_fastest() -> None:
    assert policy.client_limited([10.0, 2.0, 2.0, 6.0], LINK) == 2
    # Every session alike: nothing but the link limits them.
    assert policy.client_limited([2.0, 2.0, 2.0], LINK) == 0
    # A fast session too new to read shares what the read ones leave of the link.
    assert policy.client_limited([2.0, 2.0, None], 40.0) == 2
    assert policy.client_limited([], LINK) == 0


def test_slots_nobody_needs_are_given_back_a_minute_after_the_last_rise() -> None:
    """The slow crowd has gone: nobody waits and most slots stand empty."""
    state = SlotSizing(12, SizingReason.LIMITED, 0.0, raised_at=0.0, direction=+1)
    quiet = read(30.0, 0.3 * LINK, active=3, waiting=False)
    assert policy.size_slots(state, quiet, 2, 16).count == 12  # within the minute
    later = policy.size_slots(state, read(61.0, 0.3 * LINK, active=3, waiting=False), 2, 16)
    assert (later.count, later.reason) == (11, SizingReason.UNUSED)
    # Down to the sessions held and the headroom, not below.
    state = SlotSizing(5, SizingReason.UNUSED, 0.0, direction=-1)
    assert (
        policy.size_slots(state, read(61.0, 0.3 * LINK, active=3, waiting=False), 2, 16).count == 5
    )


def untold(
    now: float, delivery: float, *, active: int, waiting: int = 3, capacity: float, since: float
) -> policy.SizingReading:
    """A reading with no link rate configured: ``capacity`` is what was measured."""
    return policy.SizingReading(
        now, waiting, active, delivery, capacity, 0, since, capacity_told=False
    )


def test_without_a_rate_told_a_link_full_of_equal_slots_is_probed() -> None:
    """Four slots carry 8 MiB/s, all the link was measured to carry: four clients of
    2 MiB/s read so as well as a full link. A configured rate says which; without one,
    slots more do (as many as wait, at most doubling the count)."""
    state = SlotSizing(4, SizingReason.SPARE, 0.0, raised_at=0.0, direction=+1)
    full = 8.0 * MIB
    told = read(3.0, full, active=4, capacity=full, since=1.0)
    assert policy.size_slots(state, told, 2, 64).count == 4
    probe = policy.size_slots(state, untold(3.0, full, active=4, capacity=full, since=1.0), 2, 64)
    assert (probe.count, probe.reason) == (7, SizingReason.PROBE)
    one = untold(3.0, full, active=4, waiting=1, capacity=full, since=1.0)
    assert policy.size_slots(state, one, 2, 64).count == 5


def test_a_probe_that_raised_the_delivery_stays_and_the_next_one_follows() -> None:
    state = SlotSizing(4, SizingReason.SPARE, 0.0, raised_at=0.0, direction=+1)
    full = 8.0 * MIB
    probe = policy.size_slots(state, untold(3.0, full, active=4, capacity=full, since=1.0), 2, 64)
    # Its slots are taken at 4.0; the reading that judges it begins no sooner.
    seen = policy.size_slots(probe, untold(4.0, full, active=7, capacity=full, since=2.0), 2, 64)
    assert seen.count == 7
    early = untold(5.5, 14.0 * MIB, active=7, capacity=full, since=3.0)
    assert policy.size_slots(seen, early, 2, 64).count == 7
    # Seven slots carry 14 MiB/s: each took its 2 MiB/s, the link had room. The next
    # probe opens as many as wait.
    paid = untold(6.5, 14.0 * MIB, active=7, capacity=14.0 * MIB, since=4.0)
    after = policy.size_slots(seen, paid, 2, 64)
    assert (after.count, after.reason) == (10, SizingReason.PROBE)


def test_a_probe_that_only_split_the_link_is_taken_back_and_not_repeated() -> None:
    state = SlotSizing(4, SizingReason.SPARE, 0.0, raised_at=0.0, direction=+1)
    full = 40.0 * MIB
    probe = policy.size_slots(state, untold(3.0, full, active=4, capacity=full, since=1.0), 2, 64)
    seen = policy.size_slots(probe, untold(4.0, full, active=7, capacity=full, since=2.0), 2, 64)
    split = untold(6.5, full, active=7, capacity=full, since=4.0)
    back = policy.size_slots(seen, split, 2, 64)
    assert (back.count, back.reason) == (4, SizingReason.SATURATED)
    # The link showed full with four: no probe while it reads the same.
    again = untold(9.0, full, active=4, capacity=full, since=7.0)
    assert policy.size_slots(back, again, 2, 64).count == 4
    # The capacity read lower (its fastest clients went): probing is worth it again,
    # once the count may turn.
    lower = untold(6.5 + TURN_SECONDS, 0.5 * full, active=4, capacity=0.5 * full, since=60.0)
    assert policy.size_slots(back, lower, 2, 64).reason is SizingReason.PROBE


def test_a_link_filled_by_fewer_slots_than_the_count_is_not_probed() -> None:
    """A fast crowd's start: three slots carried the link, four are open; a fifth would
    only split it (and the fast crowd got more than the best fixed count plus two)."""
    state = SlotSizing(4, SizingReason.SPARE, 0.0, raised_at=0.0, direction=+1)
    full = 40.0 * MIB
    three = policy.size_slots(state, untold(1.5, full, active=3, capacity=full, since=-0.5), 2, 64)
    assert three.count == 4 and three.filled == (full, 3)
    four = untold(3.0, full, active=4, capacity=full, since=1.0)
    assert policy.size_slots(three, four, 2, 64).count == 4


def test_a_probe_opens_more_than_a_small_spare_step_would() -> None:
    """Four slow slots carry 8 MiB/s of a floor of 9.5 read so far: the room to 90 %
    takes half a slot, and a spare step would open one while four wait. Without a rate
    told that floor is only what the link has carried: a probe opens as many as wait."""
    state = SlotSizing(4, SizingReason.SPARE, 0.0, raised_at=0.0, direction=+1)
    small = untold(3.0, 8.0 * MIB, active=4, waiting=4, capacity=9.5 * MIB, since=1.0)
    probe = policy.size_slots(state, small, 2, 64)
    assert (probe.count, probe.reason) == (8, SizingReason.PROBE)
    told = read(3.0, 8.0 * MIB, active=4, capacity=9.5 * MIB, since=1.0)
    assert policy.size_slots(state, told, 2, 64).count == 5


def test_the_count_climbs_for_a_few_seconds_after_a_step_up() -> None:
    """:func:`rising_slots`: what the next step may open, for the waiters' check delays."""
    up = SlotSizing(6, SizingReason.SPARE, 10.0, raised_at=10.0, direction=+1)
    assert policy.rising_slots(up, 10.0 + policy.RISING_SECONDS, 64) == 6
    assert policy.rising_slots(up, 10.0 + policy.RISING_SECONDS, 8) == 2
    assert policy.rising_slots(up, 10.1 + policy.RISING_SECONDS, 64) == 0
    reading = replace(up, probe=(3, 6.0 * MIB))
    assert policy.rising_slots(reading, 60.0, 64) == 6  # a probe being read
    down = replace(up, direction=-1)
    assert policy.rising_slots(down, 10.0, 64) == 0
    assert policy.rising_slots(None, 10.0, 64) == 0
