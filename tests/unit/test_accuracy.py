"""The scoring of announced start times (R-EST-4): per wait, signed, relative, inside."""

from __future__ import annotations

import pytest

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
    scorer.score(0.0, 100.0, 88.0)
    scorer.score(0.0, 100.0, 112.0)
    scorer.score(0.0, 100.0, 112.5)
    accuracy = scorer.accuracy()
    assert (accuracy.scored, accuracy.inside_interval) == (3, 2)
    assert accuracy.share_inside == pytest.approx(2 / 3)


def test_errors_are_signed_and_relative_to_the_announced_wait() -> None:
    scorer = EstimateScorer()
    scorer.score(0.0, 100.0, 90.0)  # 10 s early over a 100 s wait
    scorer.score(50.0, 50.2, 51.2)  # 1 s late over a wait of 0.2 s: counted over 1 s
    accuracy = scorer.accuracy()
    assert accuracy.signed_error_seconds.total == pytest.approx(-9.0)
    assert accuracy.relative_error.total == pytest.approx(0.1 + 1.0)
    assert scorer.absolute().snapshot().total == pytest.approx(11.0)


def test_nothing_scored_has_no_share() -> None:
    assert EstimateScorer().accuracy().share_inside is None
