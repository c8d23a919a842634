"""The scoring of announced start times (R-EST-4): per wait, signed, relative, inside."""

from __future__ import annotations

import pytest

from arkvory_sched import ClientKind
from arkvory_sched.measures._accuracy import EstimateScorer
from arkvory_sched.policy import estimate_interval


@pytest.mark.parametrize(
    ("estimated_at", "start", "interval"),
    [
        (0.0, 100.0, (88.0, 112.0)),  # ±12 % of a 100 s wait
        (0.0, 10.0, (8.0, 12.0)),  # never narrower than ±2 s
        (5.0, 6.0, (5.0, 8.0)),  # never earlier than the moment of the estimate
    ],
)
def test_the_announced_interval(
    estimated_at: float, start: float, interval: tuple[float, float]
) -> None:
    assert estimate_interval(start, estimated_at) == pytest.approx(interval)


def test_a_start_at_either_end_of_the_interval_is_inside() -> None:
    scorer = EstimateScorer()
    scorer.score(0.0, 100.0, 88.0, has_id=True)
    scorer.score(0.0, 100.0, 112.0, has_id=True)
    scorer.score(0.0, 100.0, 112.5, has_id=False)
    accuracy = scorer.accuracy()
    assert (accuracy.scored, accuracy.inside_interval) == (3, 2)
    assert accuracy.share_inside == pytest.approx(2 / 3)


def test_errors_are_signed_and_relative_to_the_announced_wait() -> None:
    scorer = EstimateScorer()
    scorer.score(0.0, 100.0, 90.0, has_id=True)  # 10 s early over a 100 s wait
    scorer.score(50.0, 50.2, 51.2, has_id=True)  # 1 s late over a wait of 0.2 s: counted over 1 s
    accuracy = scorer.accuracy()
    assert accuracy.signed_error_seconds.total == pytest.approx(-9.0)
    assert accuracy.relative_error.total == pytest.approx(0.1 + 1.0)
    assert scorer.absolute().snapshot().total == pytest.approx(11.0)


def test_nothing_scored_has_no_share() -> None:
    assert EstimateScorer().accuracy().share_inside is None


def test_each_wait_is_scored_in_the_totals_and_in_its_kind_of_client() -> None:
    """Issue #28: a protocol client's wait and a third-party tool's each count in their
    own kind's scores, and both in the totals."""
    scorer = EstimateScorer()
    scorer.score(0.0, 100.0, 95.0, has_id=True)  # 5 s early, inside ±12 s
    scorer.score(0.0, 100.0, 160.0, has_id=False)  # 60 s late, outside
    scorer.score(0.0, 20.0, 21.0, has_id=False)  # 1 s late, inside ±2.4 s
    by_client = scorer.accuracy_by_client()
    assert set(by_client) == set(ClientKind)
    protocol, third_party = by_client[ClientKind.PROTOCOL], by_client[ClientKind.THIRD_PARTY]
    assert (protocol.scored, protocol.inside_interval) == (1, 1)
    assert (third_party.scored, third_party.inside_interval) == (2, 1)
    assert third_party.share_inside == pytest.approx(0.5)
    assert protocol.signed_error_seconds.total == pytest.approx(-5.0)
    assert third_party.signed_error_seconds.total == pytest.approx(61.0)
    assert third_party.absolute_error_seconds.total == pytest.approx(61.0)
    assert third_party.relative_error.total == pytest.approx(0.6 + 0.05)
    total = scorer.accuracy()
    assert (total.scored, total.inside_interval) == (3, 2)
    assert total.absolute_error_seconds == scorer.absolute().snapshot()
    assert total.absolute_error_seconds.total == pytest.approx(66.0)


def test_a_kind_of_client_nobody_scored_has_no_share() -> None:
    scorer = EstimateScorer()
    scorer.score(0.0, 100.0, 95.0, has_id=True)
    third_party = scorer.accuracy_by_client()[ClientKind.THIRD_PARTY]
    assert (third_party.scored, third_party.share_inside) == (0, None)


@pytest.mark.parametrize(("has_id", "kind"), [(True, "protocol"), (False, "third_party")])
def test_the_kind_of_client_is_whether_it_sent_a_download_id(has_id: bool, kind: str) -> None:
    assert ClientKind.of(has_id).value == kind
