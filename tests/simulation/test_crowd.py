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


# Not met yet, and issue #28 stays open for it (benchmarks/RESULTS.md): objects of 20 to
# 60 MB make the later rounds of the queue start when the sizes of the waiters ahead
# say, and the estimate counts them at the mean waiting size (the pure SDK crowd with
# these sizes is at p95 2.5 as well; scenario 1, one size, is at 0.3). Strict: the day
# the targets are met, these fail until the marks are removed.
ACCURACY_NOT_MET = pytest.mark.xfail(
    strict=True, reason="issue #28: later rounds estimated at the mean waiting size"
)


def test_every_client_of_the_crowd_finishes(crowd: CrowdRun) -> None:
    assert crowd.unfinished == 0


@ACCURACY_NOT_MET
@pytest.mark.parametrize("kind", KINDS)
def test_start_estimates_are_accurate_at_p95_for_each_kind_of_client(
    crowd: CrowdRun, kind: str
) -> None:
    figures = crowd.groups[kind]
    assert figures.estimates >= figures.clients // 2  # judged on most clients, not a few
    assert figures.ratio_p95 <= 1.0


@ACCURACY_NOT_MET
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


def test_the_first_answer_on_a_cold_server_contains_the_real_start(
    crowd: CrowdRun, request: SubRequest
) -> None:
    if crowd.store is Store.POSTGRES and crowd.configured:
        # Not met yet (issue #28 stays open): PostgreSQL learns where a resumed download
        # starts only when its first range is recorded, so at t = 0 the first slot to
        # free (a resume from the middle) is counted at its whole size.
        request.applymarker(
            pytest.mark.xfail(strict=True, reason="issue #28: start offset known late")
        )
    cold = crowd.cold
    assert cold is not None
    assert cold.at == 0.0  # given while nothing had been measured yet
    assert cold.inside, cold
