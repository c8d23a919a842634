"""The peak delivery rate behind start estimates (R-EST-1)."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arkvory_sched._rate import RUN_GAP_SECONDS, RUN_MIN_SECONDS, PeakRateMeter, peak_of_means

CHUNK = 8 << 20  # 8 MiB
Record = tuple[float, float, int]


def _steady_stream(
    total_rate: float, streams: int, until: float, chunk: int = CHUNK
) -> list[Record]:
    """Responses of ``streams`` parallel downloads with staggered starts, by completion."""
    per_stream = total_rate / streams
    duration = chunk / per_stream
    records: list[Record] = []
    for stream in range(streams):
        start = stream * duration / streams  # staggered so that completions interleave
        while start + duration <= until:
            records.append((start, start + duration, chunk))
            start += duration
    records.sort(key=lambda r: r[1])
    return records


def _exact_buckets(records: list[Record]) -> dict[int, Fraction]:
    """Bytes per second when each response is delivered at a uniform rate, exactly."""
    buckets: dict[int, Fraction] = {}
    for start, end, nbytes in records:
        if end <= start:
            second = math.floor(end)
            buckets[second] = buckets.get(second, Fraction(0)) + nbytes
            continue
        s, e = Fraction(start), Fraction(end)
        for second in range(math.floor(start), math.ceil(end)):
            overlap = min(e, Fraction(second + 1)) - max(s, Fraction(second))
            if overlap > 0:
                share = nbytes * overlap / (e - s)
                buckets[second] = buckets.get(second, Fraction(0)) + share
    return buckets


# --- examples -----------------------------------------------------------------------------


def test_nothing_recorded_means_zero() -> None:
    meter = PeakRateMeter(span_seconds=1)
    assert meter.peak(1000.0) == 0.0
    assert meter.total_recent(1000.0) == 0


def test_steady_forty_megabytes_per_second_in_eight_mib_responses() -> None:
    meter = PeakRateMeter(span_seconds=1)
    now = 120.0
    for start, end, nbytes in _steady_stream(40e6, streams=5, until=now):
        meter.record(start, end, nbytes)
    assert meter.peak(now) == pytest.approx(40e6, rel=0.02)


def test_without_spreading_a_slower_stream_would_look_spiky() -> None:
    # At 12 MB/s about 1.4 responses of 8 MiB finish per second: booking each into the
    # second it finished in puts two or three into some seconds and overstates the
    # peak by a third or more. Spreading reads the same stream correctly.
    records = _steady_stream(12e6, streams=3, until=120.0)
    meter = PeakRateMeter(span_seconds=1)
    for start, end, nbytes in records:
        meter.record(start, end, nbytes)
    assert meter.peak(120.0) == pytest.approx(12e6, rel=0.02)
    by_end: dict[int, int] = {}
    for _, end, nbytes in records:
        by_end[math.floor(end)] = by_end.get(math.floor(end), 0) + nbytes
    spiky_peak = max(n for second, n in by_end.items() if 60 <= second < 120)
    assert spiky_peak > 12e6 * 1.3


def test_peak_returns_to_zero_after_an_idle_window() -> None:
    meter = PeakRateMeter(span_seconds=1)
    for start, end, nbytes in _steady_stream(40e6, streams=4, until=120.0):
        meter.record(start, end, nbytes)
    assert meter.peak(150.0) == pytest.approx(40e6, rel=0.02)  # idle time does not lower it
    assert meter.peak(178.5) == pytest.approx(40e6, rel=0.02)  # second 118 still counts
    assert meter.peak(179.5) > 0.0  # the partly busy second 119 is the last to leave
    assert meter.peak(180.0) == 0.0
    assert meter.total_recent(180.0) == 0


def test_a_response_is_spread_over_the_seconds_it_spanned() -> None:
    meter = PeakRateMeter(span_seconds=1)
    meter.record(10.5, 12.5, 4000)
    # Seconds 10, 11 and 12 get a quarter, a half and a quarter.
    assert meter.peak(11.0) == 1000.0  # second 10 alone is complete
    assert meter.total_recent(11.0) == 1000
    assert meter.peak(12.0) == 2000.0
    assert meter.total_recent(12.0) == 3000
    assert meter.peak(13.0) == 2000.0
    assert meter.total_recent(13.0) == 4000


def test_the_second_in_progress_does_not_count() -> None:
    meter = PeakRateMeter(span_seconds=1)
    meter.record(10.0, 10.5, 500)
    assert meter.peak(10.9) == 0.0
    assert meter.peak(11.0) == 500.0


def test_a_response_ending_on_a_second_boundary_stays_out_of_the_next_second() -> None:
    meter = PeakRateMeter(span_seconds=1)
    meter.record(9.0, 11.0, 2000)
    assert meter.total_recent(11.0) == 2000
    assert meter.peak(11.0) == 1000.0


def test_zero_duration_goes_into_the_second_containing_the_end() -> None:
    meter = PeakRateMeter(span_seconds=1)
    meter.record(5.5, 5.5, 300)
    meter.record(7.0, 5.2, 200)  # end before start: still booked at the end
    assert meter.peak(6.0) == 500.0
    assert meter.total_recent(6.0) == 500


def test_concurrent_responses_add_up() -> None:
    meter = PeakRateMeter(span_seconds=1)
    meter.record(0.0, 2.0, 2000)
    meter.record(1.0, 2.0, 500)
    assert meter.peak(2.0) == 1500.0
    assert meter.total_recent(2.0) == 2500


def test_data_older_than_the_window_is_dropped() -> None:
    meter = PeakRateMeter(window_seconds=60, span_seconds=1)
    meter.record(200.0, 201.0, 1000)
    meter.record(100.0, 101.0, 5000)  # reported late, long after leaving the window
    assert meter.peak(102.0) == 0.0
    assert meter.peak(202.0) == 1000.0


def test_a_slot_reused_a_lap_later_forgets_its_old_second() -> None:
    meter = PeakRateMeter(window_seconds=3, span_seconds=1)  # four slots
    meter.record(1.0, 2.0, 100)
    meter.record(5.0, 6.0, 7)  # same slot as second 1
    assert meter.total_recent(6.0) == 7
    assert meter.peak(6.0) == 7.0


def test_a_very_long_response_books_only_the_recent_window() -> None:
    meter = PeakRateMeter(span_seconds=1)
    meter.record(0.0, 1e9, 10**12)  # bounded work although it spans a billion seconds
    assert meter.peak(1e9) == pytest.approx(1000.0)
    assert meter.total_recent(1e9) == 60_000


def test_invalid_input_is_rejected() -> None:
    with pytest.raises(ValueError, match="window_seconds"):
        PeakRateMeter(0)
    meter = PeakRateMeter(span_seconds=1)
    with pytest.raises(ValueError, match="negative"):
        meter.record(0.0, 1.0, -1)
    with pytest.raises(ValueError, match="finite"):
        meter.record(0.0, math.inf, 1)
    with pytest.raises(ValueError, match="finite"):
        meter.record(math.nan, 1.0, 1)
    with pytest.raises(ValueError, match="finite"):
        meter.peak(math.nan)


def test_complete_seconds_lists_every_second_of_the_window_in_order() -> None:
    meter = PeakRateMeter(4, span_seconds=1)
    meter.record(100.2, 100.7, 500)  # second 100
    meter.record(102.0, 104.0, 2000)  # seconds 102 and 103, 1000 each
    meter.record(104.5, 104.6, 999)  # second 104: in progress at 104.9
    first, seconds = meter.complete_seconds(104.9)
    assert first == 100
    assert seconds == [500.0, 0.0, 1000.0, 1000.0]
    assert max(seconds) == meter.peak(104.9)


def test_complete_seconds_of_two_meters_add_up_to_the_fleets_peak() -> None:
    """Two processes each delivering R in alternate seconds peak at R each; the fleet
    together delivered R every second, not 2R (ADR 0027)."""
    rate = 1000
    even, odd = PeakRateMeter(10, span_seconds=1), PeakRateMeter(10, span_seconds=1)
    for second in range(20):
        (even if second % 2 == 0 else odd).record(second, second + 1, rate)
    first_even, even_seconds = even.complete_seconds(20.5)
    first_odd, odd_seconds = odd.complete_seconds(20.5)
    assert first_even == first_odd == 10
    summed = [a + b for a, b in zip(even_seconds, odd_seconds, strict=True)]
    assert even.peak(20.5) + odd.peak(20.5) == 2 * rate
    assert max(summed) == rate


def test_complete_seconds_forget_a_slot_reused_a_lap_later() -> None:
    meter = PeakRateMeter(3, span_seconds=1)
    meter.record(1.0, 1.5, 700)  # second 1, in ring slot 1
    meter.record(9.0, 9.5, 0)  # nothing: slot 1 still says second 1
    assert meter.complete_seconds(9.5) == (6, [0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="finite"):
        meter.complete_seconds(math.inf)


# --- properties ----------------------------------------------------------------------------

times = st.floats(0.0, 300.0, allow_nan=False, allow_infinity=False)
records_strategy = st.lists(
    st.tuples(times, st.floats(0.0, 40.0), st.integers(0, 10**9)).map(
        lambda r: (r[0], r[0] + r[1], r[2])
    ),
    max_size=30,
)


@given(st.integers(1, 10), records_strategy, st.floats(0.0, 80.0))
def test_buckets_match_an_exact_model_once_everything_is_reported(
    window: int, records: list[Record], after: float
) -> None:
    meter = PeakRateMeter(window, span_seconds=1)
    for start, end, nbytes in records:
        meter.record(start, end, nbytes)
    now = max((end for _, end, _ in records), default=0.0) + after
    exact = _exact_buckets(records)
    current = math.floor(now)
    in_window = [exact.get(second, Fraction(0)) for second in range(current - window, current)]
    expected_peak = float(max(in_window))
    assert meter.peak(now) == pytest.approx(expected_peak, rel=1e-9, abs=1e-6)
    assert abs(meter.total_recent(now) - float(sum(in_window))) <= 1.0
    first, seconds = meter.complete_seconds(now)
    assert first == current - window
    assert seconds == pytest.approx([float(b) for b in in_window], rel=1e-9, abs=1e-6)


@given(st.integers(1, 10), records_strategy, times)
def test_peak_never_exceeds_the_true_per_second_bytes(
    window: int, records: list[Record], now: float
) -> None:
    meter = PeakRateMeter(window, span_seconds=1)
    for start, end, nbytes in records:
        meter.record(start, end, nbytes)
    exact = _exact_buckets(records)
    true_max = float(max(exact.values(), default=Fraction(0)))
    assert meter.peak(now) <= true_max * (1 + 1e-9) + 1e-6


@given(records_strategy.map(lambda rs: [r for r in rs if r[1] > r[0]]), times)
def test_peak_never_exceeds_the_highest_instantaneous_rate(
    records: list[Record], now: float
) -> None:
    meter = PeakRateMeter(span_seconds=1)
    for start, end, nbytes in records:
        meter.record(start, end, nbytes)
    # The aggregate rate is piecewise constant and highest just after some start.
    highest = max(
        (sum(n / (e - s) for s, e, n in records if s <= start < e) for start, _, _ in records),
        default=0.0,
    )
    assert meter.peak(now) <= highest * (1 + 1e-9) + 1e-6


@given(st.integers(1, 10), st.lists(st.tuples(times, times, st.integers(0, 10**6))))
def test_memory_is_fixed_by_the_window(window: int, records: list[Record]) -> None:
    meter = PeakRateMeter(window, span_seconds=1)
    for start, end, nbytes in records:
        meter.record(start, end, nbytes)
        assert len(meter._bytes) == len(meter._seconds) == window + 1


# --- the five-second mean (ADR 0028) --------------------------------------------------------


def test_peak_of_means_is_the_busiest_run_of_span_seconds() -> None:
    # One run; its first and last seconds are partial and left out: 9, 1, 1, 5.
    assert peak_of_means([1.0, 9.0, 1.0, 1.0, 5.0, 2.0], span=2) == 5.0
    assert peak_of_means([1.0, 9.0, 1.0, 1.0, 5.0, 2.0], span=1) == 9.0
    assert peak_of_means([2.0, 4.0], span=5) == 4.0  # a short run: its busiest second
    assert peak_of_means([1.0, 3.0, 5.0, 1.0], span=5) == 4.0  # fewer seconds than the span
    assert peak_of_means([], span=5) == 0.0


def test_idle_seconds_never_lower_the_mean() -> None:
    busy = [10.0, 40.0, 40.0, 40.0, 10.0]
    assert peak_of_means([0.0] * 30 + busy + [0.0] * 20, span=5) == 40.0
    # Two runs with idle time between: each is read on its own, the busier one counts.
    assert peak_of_means([*busy, 0.0, 0.0, 5.0, 20.0, 20.0, 5.0], span=5) == 40.0
    with pytest.raises(ValueError, match="span"):
        peak_of_means([1.0], span=0)


def test_a_saturated_link_read_second_by_second_is_overstated_and_the_mean_is_not() -> None:
    """A response's bytes are spread over its span when it reports, so some of what one
    second carried is booked into a neighbour: single seconds scatter around what the
    link carried and the busiest of sixty overstates a full link, while five seconds
    together lose or gain only what crossed their two edges."""
    rng = random.Random(28)
    link = 40e6
    seconds = [link] * 60
    for i in range(59):
        moved = link * rng.uniform(-0.08, 0.08)
        seconds[i] -= moved
        seconds[i + 1] += moved
    assert sum(seconds) == pytest.approx(60 * link)
    assert peak_of_means(seconds, span=1) > 1.07 * link
    assert peak_of_means(seconds, span=5) < 1.03 * link


def test_busy_seconds_hold_the_rate_until_the_last_leaves_the_window() -> None:
    meter = PeakRateMeter()
    for second in range(100, 105):
        meter.record(second, second + 1.0, 40_000_000)
    assert meter.peak(105.0) == pytest.approx(40e6)
    assert meter.peak(160.5) == pytest.approx(40e6)  # seconds 100..159: all five inside
    assert meter.peak(164.5) == pytest.approx(40e6)  # second 104 alone is still inside
    assert meter.peak(165.0) == 0.0


def test_span_outside_one_to_the_window_is_refused() -> None:
    with pytest.raises(ValueError, match="span_seconds"):
        PeakRateMeter(10, span_seconds=11)
    with pytest.raises(ValueError, match="span_seconds"):
        PeakRateMeter(10, span_seconds=0)


def test_a_response_booked_within_the_same_second_is_read_at_once() -> None:
    """The peak is kept between reads of one second; a booking must not wait for the next."""
    meter = PeakRateMeter(span_seconds=1)
    meter.record(10.0, 11.0, 1000)
    assert meter.peak(12.2) == 1000.0
    meter.record(10.0, 11.0, 500)  # a response spanning second 10, reported late
    assert meter.peak(12.4) == 1500.0


def test_the_delivery_run_is_read_with_the_second_in_progress() -> None:
    meter = PeakRateMeter()
    meter.record(10.4, 10.6, 2_000)
    meter.record(10.6, 10.9, 3_000)
    assert meter.run_rate(10.9) == pytest.approx(5_000 / 0.5)
    assert meter.peak(10.9) == 0.0  # no second has completed yet


def test_a_run_shorter_than_the_minimum_or_one_that_ended_reads_nothing() -> None:
    meter = PeakRateMeter()
    meter.record(10.0, 10.2, 2_000)
    assert meter.run_rate(10.0 + RUN_MIN_SECONDS / 2) == 0.0
    assert meter.run_rate(10.2 + RUN_GAP_SECONDS + 0.1) == 0.0


def test_a_pause_begins_a_new_run() -> None:
    meter = PeakRateMeter()
    meter.record(0.0, 5.0, 5_000_000)  # a fast run, long over
    meter.record(20.0, 21.0, 1_000)
    assert meter.run_rate(21.0) == pytest.approx(1_000.0)
