"""Delivered byte ranges of a session (R-SESS-8)."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arkvory_sched.memory._intervals import DeliveredRanges

Range = tuple[int, int]

small_ranges = st.tuples(st.integers(0, 200), st.integers(0, 200))


def _assert_well_formed(ranges: DeliveredRanges) -> None:
    stored = ranges.intervals()
    assert len(stored) == len(ranges) <= ranges.max_intervals
    assert ranges.last() == (stored[-1] if stored else None)
    for start, end in stored:
        assert 0 <= start < end
    for (_, end), (next_start, _) in pairwise(stored):
        assert end < next_start  # sorted, disjoint and not even touching


def _covered_set(ranges: DeliveredRanges) -> set[int]:
    return {offset for start, end in ranges.intervals() for offset in range(start, end)}


# --- examples -----------------------------------------------------------------------------


def test_new_ranges_start_empty() -> None:
    ranges = DeliveredRanges()
    assert len(ranges) == 0
    assert ranges.intervals() == ()
    assert not ranges.covers(0, 1)
    assert ranges.covered_bytes(0, 100) == 0


def test_empty_range_is_a_no_op() -> None:
    ranges = DeliveredRanges()
    ranges.add(10, 10)
    ranges.add(20, 5)
    assert ranges.intervals() == ()


def test_disjoint_ranges_stay_sorted() -> None:
    ranges = DeliveredRanges()
    ranges.add(50, 60)
    ranges.add(0, 10)
    ranges.add(20, 30)
    assert ranges.intervals() == ((0, 10), (20, 30), (50, 60))


def test_touching_ranges_merge() -> None:
    ranges = DeliveredRanges()
    ranges.add(0, 10)
    ranges.add(10, 20)
    ranges.add(30, 40)
    ranges.add(25, 30)
    assert ranges.intervals() == ((0, 20), (25, 40))


def test_a_range_bridging_several_merges_them_all() -> None:
    ranges = DeliveredRanges()
    for start in range(0, 100, 20):
        ranges.add(start, start + 5)
    ranges.add(3, 82)
    assert ranges.intervals() == ((0, 85),)


def test_a_range_inside_a_stored_one_changes_nothing() -> None:
    ranges = DeliveredRanges()
    ranges.add(0, 100)
    ranges.add(10, 20)
    assert ranges.intervals() == ((0, 100),)


def test_covers_needs_one_interval_holding_the_whole_range() -> None:
    ranges = DeliveredRanges()
    ranges.add(0, 10)
    ranges.add(11, 20)
    assert ranges.covers(0, 10)
    assert ranges.covers(12, 20)
    assert ranges.covers(5, 5)  # empty
    assert not ranges.covers(0, 11)  # byte 10 is missing
    assert not ranges.covers(5, 15)
    assert not ranges.covers(19, 21)
    assert not ranges.covers(30, 40)


def test_covered_bytes_counts_the_overlap() -> None:
    ranges = DeliveredRanges()
    ranges.add(0, 10)
    ranges.add(20, 30)
    assert ranges.covered_bytes(0, 30) == 20
    assert ranges.covered_bytes(5, 25) == 10
    assert ranges.covered_bytes(10, 20) == 0
    assert ranges.covered_bytes(25, 25) == 0


def test_resume_mid_file_then_reading_the_rest_completes() -> None:
    # ``curl -C -``: the file from 4 MiB to its end, in three responses out of order.
    size = 16 << 20
    ranges = DeliveredRanges()
    ranges.add(12 << 20, size)
    ranges.add(4 << 20, 8 << 20)
    assert not ranges.covers(4 << 20, size)
    ranges.add(8 << 20, 12 << 20)
    assert ranges.covers(4 << 20, size)


def test_negative_offsets_are_rejected() -> None:
    with pytest.raises(ValueError, match="negative"):
        DeliveredRanges().add(-1, 5)


def test_max_intervals_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_intervals"):
        DeliveredRanges(0)


# --- forgetting ----------------------------------------------------------------------------


def test_default_bound_is_sixty_four_intervals() -> None:
    ranges = DeliveredRanges()
    for i in range(100):
        ranges.add(i * 10, i * 10 + 5)
    assert len(ranges) == 64


def test_forgetting_drops_the_shortest_interval() -> None:
    ranges = DeliveredRanges(max_intervals=3)
    ranges.add(0, 10)
    ranges.add(20, 22)  # the shortest
    ranges.add(30, 35)
    ranges.add(40, 50)
    assert ranges.intervals() == ((0, 10), (30, 35), (40, 50))


def test_forgetting_may_drop_the_range_just_added() -> None:
    ranges = DeliveredRanges(max_intervals=2)
    ranges.add(0, 10)
    ranges.add(20, 30)
    ranges.add(40, 41)
    assert ranges.intervals() == ((0, 10), (20, 30))


def test_among_equally_short_the_lowest_is_forgotten() -> None:
    ranges = DeliveredRanges(max_intervals=2)
    ranges.add(0, 5)
    ranges.add(10, 15)
    ranges.add(20, 25)
    assert ranges.intervals() == ((10, 15), (20, 25))


def test_a_merge_at_the_bound_forgets_nothing() -> None:
    ranges = DeliveredRanges(max_intervals=2)
    ranges.add(0, 5)
    ranges.add(10, 12)
    ranges.add(5, 10)
    assert ranges.intervals() == ((0, 12),)


def test_forgetting_only_delays_completion() -> None:
    ranges = DeliveredRanges(max_intervals=2)
    ranges.add(0, 100)
    ranges.add(200, 300)
    ranges.add(150, 160)  # forgotten
    assert not ranges.covers(0, 300)
    ranges.add(100, 200)  # delivering the gap again completes
    assert ranges.covers(0, 300)


# --- properties ----------------------------------------------------------------------------


@given(st.lists(small_ranges, max_size=40))
def test_matches_a_set_of_byte_offsets_without_forgetting(adds: list[Range]) -> None:
    ranges = DeliveredRanges(max_intervals=1000)
    model: set[int] = set()
    for start, end in adds:
        ranges.add(start, end)
        model.update(range(start, end))
    _assert_well_formed(ranges)
    assert _covered_set(ranges) == model


@given(st.lists(small_ranges, max_size=40), small_ranges)
def test_queries_match_the_set_model(adds: list[Range], query: Range) -> None:
    ranges = DeliveredRanges(max_intervals=1000)
    model: set[int] = set()
    for start, end in adds:
        ranges.add(start, end)
        model.update(range(start, end))
    start, end = query
    wanted = set(range(start, end))
    assert ranges.covered_bytes(start, end) == len(wanted & model)
    # With touching intervals merged, "inside one interval" is "every byte delivered".
    assert ranges.covers(start, end) == (wanted <= model)


@given(st.integers(1, 6), st.lists(small_ranges, max_size=60))
def test_always_sorted_disjoint_and_bounded(bound: int, adds: list[Range]) -> None:
    ranges = DeliveredRanges(max_intervals=bound)
    for start, end in adds:
        ranges.add(start, end)
        _assert_well_formed(ranges)


@given(st.integers(1, 6), st.lists(small_ranges, max_size=60))
def test_forgetting_never_invents_bytes(bound: int, adds: list[Range]) -> None:
    ranges = DeliveredRanges(max_intervals=bound)
    model: set[int] = set()
    for start, end in adds:
        ranges.add(start, end)
        model.update(range(start, end))
        assert _covered_set(ranges) <= model


@given(st.integers(1, 6), st.lists(small_ranges, min_size=1, max_size=60))
def test_an_overflow_forgets_a_shortest_interval(bound: int, adds: list[Range]) -> None:
    ranges = DeliveredRanges(max_intervals=bound)
    for start, end in adds:
        before = ranges.intervals()
        unbounded = DeliveredRanges(max_intervals=bound + 1)
        for kept_start, kept_end in before:
            unbounded.add(kept_start, kept_end)
        unbounded.add(start, end)
        ranges.add(start, end)
        candidates = unbounded.intervals()
        if len(candidates) > bound:
            shortest = min(candidates, key=lambda r: r[1] - r[0])
            remaining = list(candidates)
            remaining.remove(shortest)
            assert ranges.intervals() == tuple(remaining)
        else:
            assert ranges.intervals() == candidates
