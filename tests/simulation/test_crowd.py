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


# Not met yet, and issue #28 stays open for them (benchmarks/RESULTS.md): without a
# configured rate, the first answers of the cold server come from a guess of the link
# (FALLBACK_RATE, 32 MiB/s against the crowd's 40 MB/s), and their starts come about a
# fifth sooner than told (inside the wide interval a guess announces); they are most of
# the worst answers, the rest coming from the crowd's next few seconds. On PostgreSQL the
# protocol clients' p95 rests on 19 estimates, so it is their worst. With the rate
# configured every target is met since each held slot's share follows its session's
# pace (policy.slot_shares). Strict: the day one is met, its test fails until its entry
# is removed.
COLD = "issue #28: the cold server's first answers, on a guessed rate (FALLBACK_RATE)"
NOT_MET = {
    ("p95", Store.MEMORY, False, "third-party"): COLD,
    ("p95", Store.POSTGRES, False, "protocol"): COLD,
    ("p95", Store.POSTGRES, False, "third-party"): COLD,
}


def _known_unmet(request: SubRequest, target: str, crowd: CrowdRun, kind: str) -> None:
    reason = NOT_MET.get((target, crowd.store, crowd.configured, kind))
    if reason is not None:
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason))


def test_every_client_of_the_crowd_finishes(crowd: CrowdRun) -> None:
    assert crowd.unfinished == 0


@pytest.mark.parametrize("kind", KINDS)
def test_start_estimates_are_accurate_at_p95_for_each_kind_of_client(
    crowd: CrowdRun, kind: str, request: SubRequest
) -> None:
    _known_unmet(request, "p95", crowd, kind)
    figures = crowd.groups[kind]
    assert figures.estimates >= figures.clients // 2  # judged on most clients, not a few
    assert figures.ratio_p95 <= 1.0


@pytest.mark.parametrize("kind", KINDS)
def test_starts_fall_inside_the_announced_interval_for_each_kind_of_client(
    crowd: CrowdRun, kind: str, request: SubRequest
) -> None:
    _known_unmet(request, "inside", crowd, kind)
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
