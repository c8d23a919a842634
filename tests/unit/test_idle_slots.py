"""Slots left free while someone waits (issue #28): which count, and their integral.

The rule of which free slots a waiter could take is the policy's; the integration over
queue time is :class:`IdleRecord`, the value both stores keep.
"""

from __future__ import annotations

import pytest

from arkvory_sched import IdleSlots
from arkvory_sched.measures import IdleRecord
from arkvory_sched.policy import usable_free_slots

INTERACTIVE, RELEASE, BULK = 0, 1, 2


def _usable(
    waiting: dict[int, int],
    *,
    sessions: int = 4,
    reserve: int = 0,
    active: int = 0,
    active_interactive: int = 0,
    room: list[int | None] | None = None,
) -> int:
    by_class = [waiting.get(rank, 0) for rank in range(4)]
    return usable_free_slots(
        sessions=sessions,
        reserve=reserve,
        active=active,
        active_interactive=active_interactive,
        waiting_by_class=by_class,
        room=room or [],
    )


def test_free_slots_count_only_while_someone_waits() -> None:
    assert _usable({}, active=1) == 0
    assert _usable({RELEASE: 1}, active=1) == 3
    assert _usable({RELEASE: 5}, active=4) == 0


def test_a_limit_lowered_below_the_held_slots_leaves_none_free() -> None:
    assert _usable({RELEASE: 1}, sessions=2, active=3) == 0


def test_the_interactive_reserve_is_idle_only_for_a_waiting_interactive_session() -> None:
    """R-CLASS-3: with one of four slots reserved and three held by release sessions, a
    release waiter cannot take the free one; an interactive waiter can."""
    assert _usable({RELEASE: 2}, reserve=1, active=3) == 0
    assert _usable({RELEASE: 2, INTERACTIVE: 1}, reserve=1, active=3) == 1
    assert _usable({RELEASE: 2}, reserve=1, active=1) == 2
    # Interactive sessions in the other slots leave the reserve's slot to everyone.
    assert _usable({RELEASE: 1}, reserve=1, active=2, active_interactive=2) == 2


def test_a_class_outside_its_windows_leaves_a_slot_idle_only_within_its_room() -> None:
    """R-WIN-2: a bulk waiter whose class is closed with no share left does not make a
    free slot idle; with room for one slot outside its window, one slot is idle."""
    closed = [None, None, 0, None]
    assert _usable({BULK: 3}, active=1, room=closed) == 0
    assert _usable({BULK: 3, RELEASE: 1}, active=1, room=closed) == 3
    assert _usable({BULK: 3}, active=1, room=[None, None, 1, None]) == 1


def test_the_integral_counts_each_idle_slot_for_the_time_it_stayed_idle() -> None:
    record = IdleRecord(0.0)
    record = record.after(10.0, 2)  # two slots free from t=10
    record = record.after(13.0, 1)  # one taken at t=13
    record = record.after(15.0, 0)  # the other at t=15
    figures = record.figures(40.0)
    assert figures == IdleSlots(
        slots=0, slot_seconds=2 * 3.0 + 1 * 2.0, stretch_seconds=5.0, longest_stretch_seconds=5.0
    )


def test_an_open_stretch_counts_up_to_now() -> None:
    record = IdleRecord(0.0).after(2.0, 1).after(5.0, 0).after(10.0, 3)
    figures = record.figures(11.5)
    assert figures.slots == 3
    assert figures.slot_seconds == pytest.approx(3.0 + 4.5)
    assert figures.stretch_seconds == pytest.approx(1.5)  # the current one
    assert figures.longest_stretch_seconds == pytest.approx(3.0)
    later = record.figures(20.0)
    assert (later.stretch_seconds, later.longest_stretch_seconds) == (10.0, 10.0)


def test_a_stretch_of_no_time_is_none() -> None:
    """A newcomer queued and started by one admission frees and takes a slot at one
    instant: the last stretch stays the one before."""
    record = IdleRecord(0.0).after(1.0, 1).after(4.0, 0).after(9.0, 1).after(9.0, 0)
    figures = record.figures(12.0)
    assert (figures.slot_seconds, figures.stretch_seconds) == (3.0, 3.0)


def test_a_clock_that_steps_back_counts_nothing_backwards() -> None:
    record = IdleRecord(10.0).after(10.0, 1).after(8.0, 2)
    assert record.at == 10.0
    assert record.figures(9.0).slot_seconds == 0.0
    assert record.figures(11.0).slot_seconds == 2.0


def test_before_the_first_count_nothing_is_idle() -> None:
    record = IdleRecord()
    assert record.figures(100.0) == IdleSlots()
    assert record.after(50.0, 1).figures(52.0).slot_seconds == 2.0
