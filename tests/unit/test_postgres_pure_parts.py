"""The parts of the PostgreSQL implementation that need no database: the lease cache's
trust rule and the estimate arithmetic shared with the in-memory queue."""

from __future__ import annotations

import pytest

from arkvory_sched import DownloadClass, SchedulerSettings
from arkvory_sched.postgres._estimates import (
    QueueSnapshot,
    check_delay,
    estimate_start,
    smallest_first_key,
    stride_ahead,
)
from arkvory_sched.postgres._leader import (
    SHAPE_REUSE_SECONDS,
    SHAPE_REUSE_WAITING,
    QueueShape,
    caught_up,
)
from arkvory_sched.postgres._leases import LeaseCache

MIB = 1024 * 1024


class Ticker:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def remember(cache: LeaseCache, key: bytes, seconds_left: float, token: int = 7) -> None:
    cache.remember(
        key,
        slot_no=0,
        token=token,
        download_class=DownloadClass.RELEASE,
        object_size=40 * MIB,
        arrival_wall_ms=1,
        seconds_left=seconds_left,
        held=True,
    )


def test_a_lease_is_trusted_until_a_second_before_it_runs_out_and_at_most_max_trust() -> None:
    clock = Ticker()
    cache = LeaseCache(max_trust=2.0, now=clock)
    remember(cache, b"short", 1.5)
    remember(cache, b"long", 10.0)
    clock.now += 0.49
    assert cache.trusted(b"short") is not None
    clock.now += 0.02  # 0.51 s: past 1.5 s - 1 s margin
    assert cache.trusted(b"short") is None
    assert cache.trusted(b"long") is not None
    clock.now += 1.5  # 2.01 s: max_trust caps even a long lease
    assert cache.trusted(b"long") is None


def test_an_expired_or_nearly_expired_lease_is_never_trusted() -> None:
    cache = LeaseCache(now=Ticker())
    remember(cache, b"gone", 0.5)
    assert cache.trusted(b"gone") is None


def test_a_new_token_replaces_the_lease_and_its_in_flight_count() -> None:
    cache = LeaseCache(now=Ticker())
    remember(cache, b"key", 10.0, token=1)
    lease = cache.get(b"key")
    assert lease is not None
    lease.in_flight = 2
    remember(cache, b"key", 10.0, token=1)
    assert cache.get(b"key") is lease and lease.in_flight == 2
    remember(cache, b"key", 10.0, token=2)
    renewed = cache.get(b"key")
    assert renewed is not None and renewed.token == 2 and renewed.in_flight == 0


def test_dropping_untrusted_leases_keeps_those_with_responses_in_flight() -> None:
    clock = Ticker()
    cache = LeaseCache(now=clock)
    remember(cache, b"idle", 10.0)
    remember(cache, b"busy", 10.0)
    busy = cache.get(b"busy")
    assert busy is not None
    busy.in_flight = 1
    clock.now += 60
    cache.drop_untrusted_idle()
    assert cache.get(b"idle") is None
    assert cache.get(b"busy") is busy
    assert cache.in_flight_keys() == [b"busy"]


def test_stride_ahead_within_one_class_is_the_own_count() -> None:
    assert stride_ahead(5, 1, [0.0] * 4, [0, 9, 0, 0], [8, 4, 2, 1]) == 5


def test_stride_ahead_counts_other_classes_by_their_weights() -> None:
    # release (weight 4) waiter with 4 ahead of it in its class; bulk (weight 2) has 10
    # waiting at the same pass: per release turn, bulk gets half a turn.
    ahead = stride_ahead(4, 1, [0.0] * 4, [0, 5, 10, 0], [8, 4, 2, 1])
    assert ahead == 4 + 2
    # interactive (weight 8) waiters are served first and twice as often as release.
    assert stride_ahead(0, 1, [0.0] * 4, [3, 1, 0, 0], [8, 4, 2, 1]) == 1
    assert stride_ahead(2, 1, [0.0] * 4, [10, 3, 0, 0], [8, 4, 2, 1]) == 2 + 4


def snapshot(**changes: object) -> QueueSnapshot:
    values: dict[str, object] = {
        "last_release": 0.0,
        "free_at_mark": 0,
        "finish_table": (),
        "fleet_rate": 0.0,
        "class_lengths": (0, 4, 0, 0),
        "waiting_bytes": 4 * 100.0 * MIB,
        "session_count": 8,
        "passes": (0.0,) * 4,
        "active": 4,
        "active_interactive": 0,
    }
    values.update(changes)
    return QueueSnapshot(**values)  # type: ignore[arg-type]


def test_the_first_round_starts_when_slots_finish_and_later_rounds_take_service_time() -> None:
    settings = SchedulerSettings(sessions=4, reserve=0)
    table = (110.0, 120.0, 130.0, 140.0)
    view = snapshot(finish_table=table)
    rate = 100.0 * MIB
    starts = [
        estimate_start(settings, DownloadClass.RELEASE, ahead, 100.0, view, rate)
        for ahead in range(6)
    ]
    assert starts[:4] == list(table)
    service = 100.0 * MIB * 4 / rate  # a mean download on a quarter of the link
    assert starts[4] == pytest.approx(110.0 + service)


def test_a_free_reserved_slot_is_not_promised_to_release_traffic() -> None:
    settings = SchedulerSettings(sessions=4, reserve=1)
    view = snapshot(finish_table=(150.0, 160.0, 170.0), active=3)
    release = estimate_start(settings, DownloadClass.RELEASE, 0, 100.0, view, 100.0 * MIB)
    person = estimate_start(settings, DownloadClass.INTERACTIVE, 0, 100.0, view, 100.0 * MIB)
    assert person == 100.0
    assert release == 150.0


def test_check_delay_rules() -> None:
    assert (
        check_delay(b"\x00", newcomer=True, ahead=50, wait=900, marked=False, free_at_mark=0) == 2
    )
    assert check_delay(b"\x80", newcomer=False, ahead=1, wait=900, marked=True, free_at_mark=2) == 1
    far = check_delay(b"\xff", newcomer=False, ahead=999, wait=10**6, marked=False, free_at_mark=0)
    assert 2 <= far <= 300
    near = check_delay(b"\xff", newcomer=False, ahead=3, wait=8, marked=False, free_at_mark=0)
    assert 2 <= near <= 4.4


def test_smallest_first_orders_by_size_or_delays_large_objects_boundedly() -> None:
    assert smallest_first_key(5 * MIB, 10.0, 0) < smallest_first_key(6 * MIB, 0.0, 0)
    small = smallest_first_key(16 * MIB, 100.0, 600.0)
    huge = smallest_first_key(16 * MIB * 2**20, 100.0, 600.0)
    assert small == 100.0
    assert huge == 700.0, "never more than the aging time behind"


def test_idle_classes_catch_up_with_the_slowest_busy_class() -> None:
    assert caught_up([5.0, 1.0, 3.0, 0.5], [1, 3]) == [5.0, 3.0, 3.0, 3.0]
    assert caught_up([5.0, 7.0, 3.0, 0.5], [1, 3]) == [5.0, 7.0, 3.0, 3.0]  # never down


def test_when_every_class_is_idle_they_catch_up_with_the_highest_pass() -> None:
    assert caught_up([2.0, 9.0, 4.0, 0.0], [0, 1, 2, 3]) == [9.0, 9.0, 9.0, 9.0]
    assert caught_up([2.0, 9.0, 4.0, 0.0], []) == [2.0, 9.0, 4.0, 0.0]


def test_a_queue_shape_is_reused_only_for_a_long_queue_and_briefly() -> None:
    long = QueueShape((0, 10, SHAPE_REUSE_WAITING, 0), 1.0, SHAPE_REUSE_WAITING + 10, 100.0)
    assert long.reusable(100.0 + SHAPE_REUSE_SECONDS - 0.01)
    assert not long.reusable(100.0 + SHAPE_REUSE_SECONDS)
    short = QueueShape((0, 1, SHAPE_REUSE_WAITING - 2, 0), 1.0, SHAPE_REUSE_WAITING, 100.0)
    assert not short.reusable(100.0)
