"""The mass-update simulation as a test: the figures the design promises, asserted."""

from __future__ import annotations

import pytest

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
