"""Scenario 5 as a test: the targets of issue #28 for the real crowd, on both stores.

Each run is one store with the link rate configured or not; each target is asserted
for protocol clients (with a download id) and third-party tools (without) apart, since
a crowd can be told the truth on average while the curl users among it are misled.
The PostgreSQL runs need the test database: skipped without it, failed under CI.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from _pytest.fixtures import SubRequest

from tests.pg import require_database

from .scenario_crowd import CrowdRun, Store, crowd_table, scenario_crowd

pytestmark = pytest.mark.simulation

RUNS = [
    pytest.param((Store.MEMORY, True), id="memory-rate-set"),
    pytest.param((Store.MEMORY, False), id="memory-no-rate"),
    pytest.param((Store.POSTGRES, True), id="postgres-rate-set"),
    pytest.param((Store.POSTGRES, False), id="postgres-no-rate"),
]
KINDS = ("protocol", "third-party")


@pytest.fixture(scope="module", params=RUNS)
def crowd(request: SubRequest) -> Iterator[CrowdRun]:
    store, configured = request.param
    url = require_database() if store is Store.POSTGRES else ""
    result = scenario_crowd(store, configured=configured, database_url=url)
    print(crowd_table([result]))
    yield result


# Every target of issue #28 holds on both stores, with the rate configured and without.
# Without it the cold server's first answers are a guess of the link (FALLBACK_RATE,
# 32 MiB/s against the crowd's 40 MB/s) and say so: each such client's interval is
# judged on that answer, its error on its first start told on a measured rate (ADR 0042).


def test_every_client_of_the_crowd_finishes(crowd: CrowdRun) -> None:
    assert crowd.unfinished == 0


@pytest.mark.parametrize("kind", KINDS)
def test_start_estimates_are_accurate_at_p95_for_each_kind_of_client(
    crowd: CrowdRun, kind: str
) -> None:
    figures = crowd.groups[kind]
    assert figures.estimates >= figures.clients // 2  # judged on most clients, not a few
    assert figures.ratio_p95 <= 1.0


@pytest.mark.parametrize("kind", KINDS)
def test_starts_fall_inside_the_announced_interval_for_each_kind_of_client(
    crowd: CrowdRun, kind: str
) -> None:
    figures = crowd.groups[kind]
    assert figures.estimates >= figures.clients // 2
    assert figures.inside_share >= 0.90


def test_slots_idle_while_anyone_waits_at_most_one_percent(crowd: CrowdRun) -> None:
    assert crowd.run.idle_share <= 0.01


def test_no_slot_idles_longer_than_3_s_while_waiters_are_present(crowd: CrowdRun) -> None:
    assert crowd.run.longest_idle_stretch <= 3.0


def test_the_first_answer_on_a_cold_server_contains_the_real_start(crowd: CrowdRun) -> None:
    cold = crowd.cold
    assert cold is not None
    assert cold.at == 0.0  # given while nothing had been measured yet
    assert cold.inside, cold


def test_answers_on_a_guessed_rate_say_so_and_their_clients_are_told_again(
    crowd: CrowdRun,
) -> None:
    """Only a cold server without a configured rate guesses, and says so (ADR 0042);
    every client it guessed for has the start inside that answer's interval, and is
    told a start on a measured rate before it starts, which is the one judged."""
    guessed = [r for r in crowd.run.results if r.guessed]
    if crowd.configured:
        assert guessed == []
        return
    assert len(guessed) >= 5
    for result in guessed:
        assert result.first_start is not None
        assert result.estimate_earliest is not None and result.estimate_latest is not None
        assert result.estimate_earliest <= result.first_start <= result.estimate_latest
        assert result.estimate is not None
