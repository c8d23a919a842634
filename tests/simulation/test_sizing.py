"""Scenario 6's targets (issue #30): slots that size themselves, against fixed counts
and the oracle that knows each client's speed. Deterministic: simulated time only."""

from __future__ import annotations

import itertools
from functools import cache

import pytest

from tests.pg import require_database

from .scenario_sizing import (
    AUTO,
    POSTGRES_CROWD,
    SizingRun,
    fast_clients,
    follow,
    half_slow_clients,
    run_sizing,
    sizing_settings,
    turning_clients,
)

TOLD = (True, False)


def _label(told: bool) -> str:
    return "rate told" if told else "rate not told"


@cache
def half(told: bool) -> SizingRun:
    return run_sizing("auto", half_slow_clients(), sizing_settings(AUTO, configured=told))


@cache
def fast(sessions: int | None, told: bool = True) -> SizingRun:
    settings = sizing_settings(AUTO if sessions is None else sessions, configured=told)
    return run_sizing("fast", fast_clients(), settings)


@cache
def turning(told: bool) -> SizingRun:
    return run_sizing("turning", turning_clients(), sizing_settings(AUTO, configured=told))


@pytest.mark.parametrize("told", TOLD, ids=_label)
def test_every_client_finishes_and_the_count_stays_within_its_bounds(told: bool) -> None:
    for run in (half(told), fast(None, told), turning(told)):
        assert all(r.finished is not None for r in run.run.results)
        assert {n for _, n in run.counts} <= set(range(AUTO[0], AUTO[1] + 1))


def test_half_slow_keeps_the_link_full_while_anyone_waits_with_the_rate_told() -> None:
    assert half(True).run.link_use_while_queued >= 0.95


def test_half_slow_keeps_the_link_full_while_anyone_waits_with_the_rate_not_told() -> None:
    assert half(False).run.link_use_while_queued >= 0.95


@pytest.mark.parametrize("told", TOLD, ids=_label)
def test_half_slow_completes_within_a_tenth_of_the_oracle_that_knows_speeds(told: bool) -> None:
    run = half(told)
    assert run.mean_completion <= 1.10 * run.ideal


@pytest.mark.parametrize("told", TOLD, ids=_label)
def test_a_fast_crowd_gets_no_more_slots_than_the_best_fixed_count_plus_two(told: bool) -> None:
    best = min((fast(n) for n in (2, 3, 4, 6)), key=lambda r: r.mean_completion)
    assert fast(None, told).most <= best.most + 2


def test_a_fast_crowd_completes_within_two_per_cent_of_the_best_fixed_count() -> None:
    best = min(fast(n).mean_completion for n in (2, 3, 4, 6))
    assert fast(None, True).mean_completion <= 1.02 * best


def test_a_fast_crowd_completes_within_two_per_cent_without_the_rate_told() -> None:
    best = min(fast(n).mean_completion for n in (2, 3, 4, 6))
    assert fast(None, False).mean_completion <= 1.02 * best


@pytest.mark.parametrize("told", TOLD, ids=_label)
def test_the_count_follows_clients_that_turn_slow_and_falls_back_after(told: bool) -> None:
    run = turning(told)
    rise, near, last = follow(run)
    assert rise is not None and rise <= 30.0, rise
    assert near is not None and near <= 30.0, near
    assert last < run.most


@pytest.mark.parametrize("told", TOLD, ids=_label)
def test_the_count_turns_at_most_once_a_minute(told: bool) -> None:
    for run in (half(told), fast(None, told), turning(told)):
        turns = run.turns()
        assert all(b - a >= 60.0 for a, b in itertools.pairwise(turns)), turns


@cache
def on_postgres(told: bool = True) -> SizingRun:
    url = require_database()
    clients = half_slow_clients(POSTGRES_CROWD)
    return run_sizing("auto", clients, sizing_settings(AUTO, configured=told), database_url=url)


@cache
def slow_first(told: bool) -> SizingRun:
    """The smaller half-slow crowd on memory: its first four clients are slow."""
    settings = sizing_settings(AUTO, configured=told)
    return run_sizing("auto", half_slow_clients(POSTGRES_CROWD), settings)


def test_slow_clients_first_without_a_rate_told_are_probed_on_both_stores() -> None:
    """The first clients all slow and no rate told: the link was measured at what they
    took, and read full. Before the probe, the count stayed at four for 24 s and the
    crowd used 82 % of the link while anyone waited, at 2.05 times the oracle's mean;
    now it climbs as the probes pay, alike on both stores."""
    memory, postgres = slow_first(False), on_postgres(False)
    for run in (memory, postgres):
        assert run.run.link_use_while_queued >= 0.90
        assert run.mean_completion <= 1.15 * run.ideal
        nine = run.first_at_least(9)
        assert nine is not None and nine <= 15.0, nine
    assert abs(postgres.mean_completion - memory.mean_completion) <= 0.05 * memory.mean_completion


def test_on_postgresql_half_slow_meets_the_targets_without_the_rate_told() -> None:
    run = on_postgres(False)
    assert run.run.link_use_while_queued >= 0.95
    assert run.mean_completion <= 1.10 * run.ideal


def test_on_postgresql_the_leader_sizes_the_fleet_s_slots() -> None:
    auto = on_postgres()
    assert all(r.finished is not None for r in auto.run.results)
    assert {n for _, n in auto.counts} <= set(range(AUTO[0], AUTO[1] + 1))
    assert auto.most >= 12  # from the minimum of 2, for the slow clients
    turns = auto.turns()
    assert all(b - a >= 60.0 for a, b in itertools.pairwise(turns)), turns


def test_on_postgresql_half_slow_keeps_the_link_full_while_anyone_waits() -> None:
    assert on_postgres().run.link_use_while_queued >= 0.95


def test_on_postgresql_half_slow_completes_within_a_tenth_of_the_oracle() -> None:
    run = on_postgres()
    assert run.mean_completion <= 1.10 * run.ideal
