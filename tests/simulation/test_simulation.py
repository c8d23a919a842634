"""The mass-update simulation as a test: the figures the design promises, asserted."""

from __future__ import annotations

import pytest

from arkvory_sched.policy import MAX_CHECK_SECONDS

from .scenario_windows import OPENS_AFTER, Scenario4, scenario_4, scenario_4_table
from .scenarios import (
    SLOTS,
    Scenario1,
    Scenario2,
    Scenario3,
    scenario_1,
    scenario_1_table,
    scenario_2,
    scenario_2_table,
    scenario_3,
    scenario_3_table,
)

pytestmark = pytest.mark.simulation


@pytest.fixture(scope="module")
def mass_update() -> Scenario1:
    result = scenario_1()
    print(scenario_1_table(result))
    return result


@pytest.fixture(scope="module")
def night_window() -> Scenario4:
    result = scenario_4()
    print(scenario_4_table(result))
    return result


@pytest.fixture(scope="module")
def mixed_classes() -> Scenario2:
    result = scenario_2()
    print(scenario_2_table(result))
    return result


@pytest.fixture(scope="module")
def mixed_sizes() -> Scenario3:
    result = scenario_3()
    print(scenario_3_table(result))
    return result


def test_every_download_completes_without_client_error(mass_update: Scenario1) -> None:
    assert mass_update.unfinished == 0
    assert mass_update.errors == 0


def test_ordered_mean_completion_is_near_the_ideal(mass_update: Scenario1) -> None:
    assert mass_update.ordered_mean <= 1.05 * mass_update.oracle_mean


def test_ordered_beats_equal_sharing(mass_update: Scenario1) -> None:
    assert mass_update.ordered_mean <= 0.55 * mass_update.shared_mean


def test_first_clients_finish_within_the_time_of_one_batch(mass_update: Scenario1) -> None:
    assert mass_update.first_batch_finish <= mass_update.first_batch_bound


def test_link_stays_busy_while_anyone_waits(mass_update: Scenario1) -> None:
    assert mass_update.ordered.link_busy_share >= 0.99


def test_start_estimates_are_accurate_at_p95(mass_update: Scenario1) -> None:
    assert mass_update.estimate_within_bound_p95 <= 1.0


def test_actual_start_falls_inside_the_announced_interval(mass_update: Scenario1) -> None:
    assert mass_update.interval_hit_share >= 0.90


def test_slots_are_never_exceeded(mass_update: Scenario1, mixed_classes: Scenario2) -> None:
    assert mass_update.ordered.max_active_sessions <= SLOTS
    assert mixed_classes.max_active <= SLOTS


def test_mixed_classes_all_finish(mixed_classes: Scenario2) -> None:
    assert mixed_classes.unfinished == 0


def test_people_get_the_reserved_slot_quickly(mixed_classes: Scenario2) -> None:
    assert mixed_classes.interactive_max_wait <= 10.0
    waits = mixed_classes.class_mean_wait
    assert waits["interactive"] < waits["release"] < waits["bulk"]


def test_weights_favour_release_over_bulk(mixed_classes: Scenario2) -> None:
    assert mixed_classes.release_share_of_grants_while_both_wait >= 0.60


def test_fleet_falls_to_its_share_while_others_wait(mixed_classes: Scenario2) -> None:
    assert mixed_classes.fleet_max_active_while_contended <= mixed_classes.fleet_share


def test_preemption_happens_for_higher_classes(mixed_classes: Scenario2) -> None:
    assert mixed_classes.preemptions > 0


def test_smallest_first_lowers_mean_completion(mixed_sizes: Scenario3) -> None:
    assert mixed_sizes.unfinished == 0
    assert mixed_sizes.smallest_mean < mixed_sizes.ordered_mean
    assert mixed_sizes.largest_wait_smallest_first < float("inf")


def test_night_window_everyone_finishes(night_window: Scenario4) -> None:
    assert night_window.unfinished == 0


def test_no_bulk_download_starts_outside_its_window(night_window: Scenario4) -> None:
    assert night_window.bulk_starts_outside == 0
    assert night_window.first_bulk_start >= OPENS_AFTER


def test_release_has_the_link_while_bulk_waits(night_window: Scenario4) -> None:
    # Not 99 % as in scenario 1: while the closed fleet waits the queue is never empty,
    # so a release newcomer on an idle link waits for the next tick's mark and its
    # next poll (R-SESS-12), about 2 s at the start of each wave.
    assert night_window.release_busy_share >= 0.97
    assert night_window.release_unfinished_at_opening == 0


def test_estimates_at_the_opening_are_nearly_as_accurate_as_scenario_1(
    night_window: Scenario4,
) -> None:
    """The fleet's first estimates after the opening, within 1.25 of scenario 1's bound
    at the p95 and 80 % inside their interval. The run is deterministic, but the poll
    phases of 200 waiters at the opening follow every jitter drawn before it: over four
    seeds of the engine the p95 ranged from 0.85 to 2.4 and the share inside from 57 %
    to 92 %, pooled 1.14 and 81 % (1.10 and 87 % before open classes' newcomers passed
    closed waiters, issue #26). One seed's 1.0 and 90 % were luck, not a property."""
    assert night_window.estimates >= night_window.fleet // 2
    assert night_window.estimate_within_bound_p95 <= 1.25
    assert night_window.interval_hit_share >= 0.80


def test_first_bulk_batch_finishes_within_one_batch_after_the_opening(
    night_window: Scenario4,
) -> None:
    assert night_window.first_batch_after_opening <= night_window.first_batch_bound


def test_a_fleet_waiting_for_its_window_does_not_hammer_the_server(
    night_window: Scenario4,
) -> None:
    assert night_window.fleet_mean_polls <= 1.5 * OPENS_AFTER / MAX_CHECK_SECONDS
