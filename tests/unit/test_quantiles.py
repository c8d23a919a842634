"""Quantiles off the stores' cumulative histograms, for the operator page's p50/p95."""

from __future__ import annotations

import pytest

from arkvory_sched import HistogramSnapshot
from arkvory_sched.measures._histogram import Histogram
from arkvory_sched.observability import histogram_quantile


def test_no_observations_no_quantile() -> None:
    assert histogram_quantile(Histogram().snapshot(), 0.5) is None


def test_interpolates_inside_the_bucket_that_holds_the_rank() -> None:
    histogram = Histogram((10.0, 20.0, 40.0))
    for value in (1, 2, 3, 4, 15, 16, 30, 35):
        histogram.observe(value)
    snapshot = histogram.snapshot()
    # Ranks: 4 at or below 10, 6 at or below 20, 8 at or below 40.
    assert histogram_quantile(snapshot, 0.5) == pytest.approx(10.0)
    assert histogram_quantile(snapshot, 0.25) == pytest.approx(5.0)
    assert histogram_quantile(snapshot, 0.75) == pytest.approx(20.0)
    assert histogram_quantile(snapshot, 0.95) == pytest.approx(20.0 + 20.0 * 1.6 / 2)


def test_the_overflow_bucket_reports_the_largest_bound() -> None:
    snapshot = HistogramSnapshot((1.0, 2.0), (0, 0), 3, 300.0)
    assert histogram_quantile(snapshot, 0.5) == 2.0


def test_negative_buckets_interpolate_from_their_own_lower_edge() -> None:
    histogram = Histogram((-10.0, 0.0, 10.0))
    for value in (-5, -5, 5, 5):
        histogram.observe(value)
    assert histogram_quantile(histogram.snapshot(), 0.5) == pytest.approx(0.0)


def test_quantile_outside_zero_to_one_is_refused() -> None:
    with pytest.raises(ValueError, match="between 0 and 1"):
        histogram_quantile(Histogram().snapshot(), 1.5)
