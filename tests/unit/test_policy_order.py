"""The policy's service order: stride between classes, waiters ahead, aging, keys."""

from __future__ import annotations

from arkvory_sched.policy import (
    caught_up,
    promote_at,
    service_order,
    smallest_first_key,
    stride_ahead,
    strides_of,
)

MIB = 1024 * 1024
WEIGHTS = (8, 4, 2, 1)
STRIDES = strides_of(WEIGHTS)


def test_stride_serves_classes_in_proportion_to_their_weights() -> None:
    heads = [[f"c{rank}-{n}" for n in range(16)] for rank in range(4)]
    first = [rank for rank, _ in service_order(heads, [0.0] * 4, STRIDES)][:15]
    assert [first.count(rank) for rank in range(4)] == [8, 4, 2, 1]


def test_within_a_class_the_heads_keep_their_order_and_ties_go_to_the_urgent_class() -> None:
    order = list(service_order([["a", "b"], ["x"], [], []], [0.0] * 4, STRIDES))
    assert order == [(0, "a"), (1, "x"), (0, "b")]


def test_a_class_switched_off_mid_iteration_is_skipped_from_then_on() -> None:
    allowed = [True, True, True, True]
    seen = []
    for _, item in service_order(
        [["a", "b", "c"], ["x", "y"], [], []], [0.0] * 4, STRIDES, allowed
    ):
        seen.append(item)
        if item == "x":
            allowed[1] = False
    assert seen == ["a", "x", "b", "c"]


def test_service_order_does_not_change_the_passes_it_is_given() -> None:
    passes = [0.0, 1.0, 0.0, 0.0]
    list(service_order([["a"], ["b"], [], []], passes, STRIDES))
    assert passes == [0.0, 1.0, 0.0, 0.0]


def test_stride_ahead_within_one_class_is_the_own_count() -> None:
    assert stride_ahead(5, 1, [0.0] * 4, [0, 9, 0, 0], STRIDES) == 5


def test_stride_ahead_counts_other_classes_by_their_weights() -> None:
    # A release waiter with 4 ahead in its class; bulk (half release's weight) gets
    # half a turn per release turn.
    assert stride_ahead(4, 1, [0.0] * 4, [0, 5, 10, 0], STRIDES) == 4 + 2
    assert stride_ahead(0, 1, [0.0] * 4, [3, 1, 0, 0], STRIDES) == 1
    assert stride_ahead(2, 1, [0.0] * 4, [10, 3, 0, 0], STRIDES) == 2 + 4


def test_idle_classes_catch_up_with_the_pass_of_the_last_grant() -> None:
    assert caught_up([5.0, 1.0, 3.0, 0.5], [1, 3], 2.0) == [5.0, 2.0, 3.0, 2.0]
    assert caught_up([5.0, 7.0, 3.0, 0.5], [1, 3], 2.0) == [5.0, 7.0, 3.0, 2.0]  # never down
    assert caught_up([5.0, 1.0, 3.0, 0.5], [], 9.0) == [5.0, 1.0, 3.0, 0.5]  # busy: kept


def test_smallest_first_orders_by_size_or_delays_large_objects_boundedly() -> None:
    assert smallest_first_key(5 * MIB, 10.0, 0) < smallest_first_key(6 * MIB, 0.0, 0)
    assert smallest_first_key(16 * MIB, 100.0, 600.0) == 100.0
    assert smallest_first_key(32 * MIB, 100.0, 600.0) == 160.0  # one doubling: a tenth
    assert smallest_first_key(16 * MIB * 2**20, 100.0, 600.0) == 700.0, "at most aging"


def test_aging_moves_one_class_per_period_up_to_release_only() -> None:
    assert promote_at(100.0, 3, 3, 60.0) == 160.0
    assert promote_at(100.0, 3, 2, 60.0) == 220.0  # climbed one class: the second period
    assert promote_at(100.0, 2, 2, 60.0) == 160.0
    assert promote_at(100.0, 3, 1, 60.0) is None  # release: never into interactive
    assert promote_at(100.0, 0, 0, 60.0) is None


def test_aging_off_never_promotes() -> None:
    assert promote_at(100.0, 3, 3, 0.0) is None
