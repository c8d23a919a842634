"""The HTTP benchmark's intervals: a verdict of pass or fail rests on them."""

from __future__ import annotations

import statistics

from benchmarks.http_bench import block_interval, median_interval

# Six rounds in each of five server pairs; the pairs sit apart, the rounds within one
# scatter by a tenth of a point, as the at-once runs showed.
PAIR_MEANS = (0.992, 0.970, 0.975, 0.978, 0.964)
SCATTER = (-0.001, 0.0005, 0.0, 0.001, -0.0005, 0.0002)


def clustered() -> tuple[list[float], list[int]]:
    values = [mean + step for mean in PAIR_MEANS for step in SCATTER]
    blocks = [block for block in range(1, 6) for _ in SCATTER]
    return values, blocks


def test_pairs_that_sit_apart_widen_the_interval_beyond_the_rounds_one() -> None:
    values, blocks = clustered()
    rounds_low, rounds_high = median_interval(values)
    low, high = block_interval(values, blocks)
    assert low <= statistics.median(values) <= high
    assert high - low > 2 * (rounds_high - rounds_low)
    # Resampling whole pairs reaches the outlying pair's side, which 30 rounds taken as
    # independent would rule out.
    assert high > 0.98 > rounds_high


def test_pairs_that_agree_keep_a_narrow_interval() -> None:
    values = [0.98 + step for _ in PAIR_MEANS for step in SCATTER]
    blocks = [block for block in range(1, 6) for _ in SCATTER]
    low, high = block_interval(values, blocks)
    assert high - low <= max(SCATTER) - min(SCATTER)


def test_the_same_rounds_always_give_the_same_interval() -> None:
    values, blocks = clustered()
    assert block_interval(values, blocks) == block_interval(list(values), list(blocks))


def test_fewer_than_three_pairs_give_the_whole_range() -> None:
    values = [0.97, 0.99, 0.98, 1.01]
    assert block_interval(values, [1, 1, 2, 2]) == (0.97, 1.01)


def test_the_rounds_interval_brackets_the_median_by_order_statistics() -> None:
    values = [float(v) for v in range(1, 31)]
    low, high = median_interval(values)
    # n = 30: the 10th and 21st values (binomial(30, ½) puts < 2.5 % below 10).
    assert (low, high) == (10.0, 21.0)
    assert median_interval([1.0, 2.0, 3.0]) == (1.0, 3.0)
