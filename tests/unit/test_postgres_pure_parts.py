"""The parts of the PostgreSQL implementation that need no database: the lease cache's
trust rule and the exact head of a poll's place (the rules are tested in test_policy_*)."""

from __future__ import annotations

from arkvory_sched import DownloadClass
from arkvory_sched.policy import PLACE_BUCKET, exact_head
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


def test_the_exact_head_covers_twice_what_the_next_ticks_serve_and_a_bucket() -> None:
    assert exact_head(8) == PLACE_BUCKET
    assert exact_head(1000) == 4000
