"""The policy's slot rules: reserve, share, marking budget and marks, preemption."""

from __future__ import annotations

import functools
import math

from arkvory_sched.policy import (
    BACKUP_GRACE_SECONDS,
    NEXT_SLOT_SLACK_SECONDS,
    PREEMPT_MIN_HOLD_SECONDS,
    MarkBudget,
    YieldCandidate,
    YieldHead,
    backup_may_take_slot,
    choose_marks,
    choose_victim,
    finishing_soon,
    held_at_the_door,
    keeps_its_turn,
    marking_budget,
    next_slot_free,
    over_share_with_contenders,
    slot_free_for,
    strides_of,
)

STRIDES = strides_of((8, 4, 2, 1))
NOW = 1000.0


def free(**changes: object) -> bool:
    values: dict[str, object] = {
        "sessions": 4,
        "reserve": 1,
        "active": 2,
        "active_interactive": 0,
        "interactive": False,
        "over_share": False,
    }
    values.update(changes)
    return slot_free_for(**values)  # type: ignore[arg-type]


def test_a_slot_is_free_below_the_limit_and_the_reserve_is_kept_for_interactive() -> None:
    assert free()
    assert not free(active=4, interactive=True)
    assert not free(active=3)  # the last slot is the interactive reserve
    assert free(active=3, interactive=True)
    assert free(active=3, active_interactive=1)  # the reserve is in use by a person


def test_a_principal_over_its_share_waits_only_while_others_contend() -> None:
    assert over_share_with_contenders(2, 2, contenders=True)
    assert not over_share_with_contenders(2, 2, contenders=False)
    assert not over_share_with_contenders(1, 2, contenders=True)
    assert not free(over_share=True)


def test_a_slot_finishing_within_five_seconds_or_yielding_counts_as_free() -> None:
    assert finishing_soon(500, 100.0, False)
    assert not finishing_soon(501, 100.0, False)
    assert finishing_soon(10**9, 100.0, True)


def test_the_budget_is_twice_the_soon_free_slots_and_keeps_the_reserve() -> None:
    budget = marking_budget(
        sessions=4, reserve=1, active=4, active_interactive=1, soon=1, soon_interactive=1
    )
    assert budget == MarkBudget(free=1, total=2, noninteractive=0)
    budget = marking_budget(
        sessions=4, reserve=1, active=2, active_interactive=0, soon=1, soon_interactive=0
    )
    assert budget == MarkBudget(free=3, total=6, noninteractive=4)
    assert marking_budget(
        sessions=2, reserve=0, active=2, active_interactive=0, soon=0, soon_interactive=0
    ) == MarkBudget(0, 0, 0)


def test_marks_follow_the_service_order_and_the_later_ones_are_back_ups() -> None:
    heads = [["p1"], ["r1", "r2"], ["b1"], []]
    marks = choose_marks(heads, [0.0] * 4, STRIDES, MarkBudget(2, 4, 4), lambda _: True)
    assert marks == [("p1", False), ("r1", False), ("b1", True), ("r2", True)]


def test_marks_pass_over_waiters_that_may_not_take_a_slot() -> None:
    heads = [[], ["r1", "r2", "r3"], [], []]
    marks = choose_marks(heads, [0.0] * 4, STRIDES, MarkBudget(1, 2, 2), lambda w: w != "r1")
    assert marks == [("r2", False), ("r3", True)]


def test_once_the_noninteractive_budget_is_spent_only_interactive_waiters_are_marked() -> None:
    heads = [["p1", "p2", "p3"], ["r1", "r2"], [], []]
    marks = choose_marks(heads, [1.0, 0.0, 0.0, 0.0], STRIDES, MarkBudget(2, 4, 1), lambda _: True)
    assert [waiter for waiter, _ in marks] == ["r1", "p1", "p2", "p3"]


def test_no_budget_marks_nobody() -> None:
    assert choose_marks([["p1"], [], [], []], [0.0] * 4, STRIDES, MarkBudget(0, 0, 0), bool) == []


def test_a_back_up_waits_one_poll_period_after_a_release() -> None:
    assert not backup_may_take_slot(NOW + BACKUP_GRACE_SECONDS - 0.01, NOW)
    assert backup_may_take_slot(NOW + BACKUP_GRACE_SECONDS, NOW)


def holder(name: str, rank: int, **changes: object) -> YieldCandidate:
    values: dict[str, object] = {
        "ref": name.encode(),
        "principal_name": name,
        "base_rank": rank,
        "principal_active": 1,
        "slot_since": NOW - PREEMPT_MIN_HOLD_SECONDS,
        "has_id": True,
        "yield_requested": False,
    }
    values.update(changes)
    return YieldCandidate(**values)  # type: ignore[arg-type]


RELEASE_HEAD = YieldHead("head", 1, interactive=False, principal_active=0)


def victim(candidates: list[YieldCandidate], head: YieldHead = RELEASE_HEAD) -> str | None:
    chosen = choose_victim(candidates, head, now=NOW, per_principal=2)
    return None if chosen is None else chosen.principal_name


def test_a_lower_class_protocol_client_held_a_minute_yields() -> None:
    assert victim([holder("bulk", 2)]) == "bulk"
    assert victim([holder("bulk", 2, slot_since=NOW - 59.0)]) is None
    assert victim([holder("bulk", 2, has_id=False)]) is None
    assert victim([holder("bulk", 2, yield_requested=True)]) is None
    assert victim([holder("release", 1)]) is None


def test_the_heads_own_principal_never_yields_to_it() -> None:
    assert victim([holder("head", 3)]) is None


def test_above_its_share_a_same_class_holder_yields_to_a_head_below_its_share() -> None:
    assert victim([holder("greedy", 1, principal_active=3)]) == "greedy"
    head_at_share = YieldHead("head", 1, interactive=False, principal_active=2)
    assert victim([holder("greedy", 1, principal_active=3)], head_at_share) is None


def test_an_interactive_session_never_yields_to_a_noninteractive_head() -> None:
    assert victim([holder("person", 0, principal_active=3)]) is None
    person_head = YieldHead("head", 0, interactive=True, principal_active=0)
    assert victim([holder("person", 0, principal_active=3)], person_head) == "person"


def test_the_lowest_class_then_the_longest_held_slot_is_chosen() -> None:
    candidates = [
        holder("bulk", 2),
        holder("old-bg", 3, slot_since=NOW - 500),
        holder("new-bg", 3, slot_since=NOW - 100),
    ]
    assert victim(candidates) == "old-bg"


def test_only_a_placed_waiter_of_the_next_round_whose_slot_may_free_within_the_hold_is_held() -> (
    None
):
    """R-HOLD-2: a handful of requests per process, never the crowd behind them."""
    held = functools.partial(held_at_the_door, now=NOW, sessions=4, hold=20.0)
    assert held(1, NOW + 5.0)
    assert held(4, NOW + 20.0)  # the last of the round, its slot freeing at the hold's end
    assert not held(5, NOW + 5.0)  # a round further back
    assert not held(1, NOW + 20.5)  # its slot frees after the hold: told when to come back
    assert not held(None, NOW)  # no place known: told when to come back
    assert not held_at_the_door(1, NOW, NOW, sessions=4, hold=0.0)  # holding is off


def test_a_marked_waiter_keeps_its_turn_only_if_due_soon_and_before_the_next_slot_frees() -> None:
    turn = functools.partial(keeps_its_turn, now=NOW)
    assert turn(NOW + 0.8, NOW + 0.8, next_free=NOW + 30.0)  # sessions of minutes
    assert turn(NOW + 0.8, NOW + 1.8, next_free=NOW + 30.0)  # told 2 s for a 1.05 s check
    assert not turn(NOW + 0.8, NOW + 0.8, next_free=NOW + 0.3)  # the next frees first
    assert not turn(NOW - 0.2, NOW + 0.8, next_free=NOW + 0.3)  # checkAt past, still asleep
    assert turn(NOW - 0.2, NOW - 0.2, next_free=NOW + 0.3)  # due already: on its way
    far = NOW + BACKUP_GRACE_SECONDS + 0.1
    assert not turn(far, far, next_free=math.inf)


def test_on_a_shared_store_the_next_slot_must_free_a_slack_after_the_waiter_is_back() -> None:
    """ADR 0043: a sleeper back 0.1 s before the next slot frees keeps its turn in
    memory, not on a shared store, whose slack is NEXT_SLOT_SLACK_SECONDS."""
    turn = functools.partial(keeps_its_turn, NOW + 0.8, NOW + 0.8, NOW)
    assert turn(NOW + 0.9)
    assert not turn(NOW + 0.9, slack=NEXT_SLOT_SLACK_SECONDS)
    assert turn(NOW + 0.8 + NEXT_SLOT_SLACK_SECONDS + 0.01, slack=NEXT_SLOT_SLACK_SECONDS)
    assert turn(NOW + 30.0, slack=NEXT_SLOT_SLACK_SECONDS)  # sessions of minutes: as before


def test_the_next_slot_frees_at_the_first_expected_end_still_ahead() -> None:
    assert next_slot_free([NOW - 1.0, NOW + 2.0, NOW + 0.5], NOW) == NOW + 0.5
    assert next_slot_free([NOW - 1.0], NOW) == math.inf  # a past end: a slot that freed
    assert next_slot_free([], NOW) == math.inf
