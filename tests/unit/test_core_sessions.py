"""Download sessions in the core (R-SESS-1..12)."""

from __future__ import annotations

import pytest

from arkvory_sched import Admitted, ByteRange, Delivered, RangeKind, Rejected, RejectReason
from arkvory_sched._session_keys import session_key
from arkvory_sched.memory._core import PendingRequest
from arkvory_sched.policy import NO_SHOW_MARGIN_SECONDS

from ._helpers import (
    CHUNK,
    MIB,
    SMALL,
    admitted,
    ask,
    assert_clean,
    deliver,
    download_all,
    fail,
    interrupt,
    keep_polling,
    make_core,
    open_from,
    position,
    queued,
    rejected,
    req,
    span,
    start,
    suffix,
    wait_in_queue,
)

SIZE = 8 * CHUNK  # 64 MiB: a session-sized object read in eight 8 MiB ranges


# --- R-SESS-1: a session is admission for the whole download -------------------------------


def test_first_download_with_nobody_waiting_starts_at_once() -> None:
    core, _ = make_core()
    grant = admitted(ask(core, req()))
    assert grant.admission == "session"
    assert core.active_count == 1
    assert core.waiting_count == 0
    assert_clean(core)


def test_ranges_of_an_active_session_pass_without_new_admission() -> None:
    core, _ = make_core(sessions=1)
    alice = req("alice", size=SIZE)
    first = admitted(ask(core, alice, span(0, CHUNK)))
    wait_in_queue(core, req("bob"))
    for i in range(1, 4):
        grant = admitted(ask(core, alice, span(i * CHUNK, (i + 1) * CHUNK)))
        assert grant.session_key == first.session_key
        deliver(core, grant)
    assert core.active_count == 1
    assert core.waiting_count == 1
    assert core.stats().admitted_total == 4
    assert_clean(core)


# --- R-SESS-2: the implicit session key ----------------------------------------------------


def test_session_key_is_principal_object_and_download_id() -> None:
    core, _ = make_core(sessions=1)
    grant = start(core, req("alice", "obj", download_id="dl-1", address="192.0.2.1"))
    # The same download from another address (a new connection, a roaming laptop).
    again = admitted(ask(core, req("alice", "obj", download_id="dl-1", address="198.51.100.7")))
    assert again.session_key == grant.session_key
    # Another download id, object or principal is another session: it has to queue.
    wait_in_queue(core, req("alice", "obj", download_id="dl-2"))
    wait_in_queue(core, req("alice", "other", download_id="dl-1"))
    wait_in_queue(core, req("bob", "obj", download_id="dl-1"))
    assert core.session_count == 4
    assert core.active_count == 1
    assert_clean(core)


def test_clients_behind_one_nat_without_id_share_one_session() -> None:
    core, _ = make_core(sessions=1)
    first = start(core, req(download_id=None, address="203.0.113.9"))
    second = admitted(ask(core, req(download_id=None, address="203.0.113.9")))
    assert second.session_key == first.session_key
    assert core.session_count == 1
    # Another address without an id is another client, and an id never matches an address.
    wait_in_queue(core, req(download_id=None, address="203.0.113.10"))
    wait_in_queue(core, req(download_id="203.0.113.9", address="203.0.113.9"))
    assert core.session_count == 3
    assert_clean(core)


# --- R-SESS-3: small objects keep the per-request queue ------------------------------------


def test_small_objects_use_per_request_queue() -> None:
    core, _ = make_core(sessions=1)
    start(core, req("alice", "big"))
    for name in ("bob", "carol", "dave"):
        wait_in_queue(core, req(name, "big"))
    decision = core.admit(req("erin", "small", size=SMALL))
    assert isinstance(decision, Admitted)
    assert decision.admission == "per-request"
    assert core.session_count == 4  # the small object made no session
    assert core.stats().request_active == 1
    assert_clean(core)


def test_session_threshold_is_strictly_more_than_min_bytes() -> None:
    core, _ = make_core(session_min_bytes=16 * MIB)
    at_threshold = core.admit(req("alice", "a", size=16 * MIB))
    above = core.admit(req("bob", "b", size=16 * MIB + 1))
    assert isinstance(at_threshold, Admitted)
    assert at_threshold.admission == "per-request"
    assert isinstance(above, Admitted)
    assert above.admission == "session"


def test_per_request_queue_bounds_active_waiting_and_per_principal() -> None:
    core, _ = make_core(max_downloads=2, transfer_queue_limit=3, transfer_queue_per_principal=2)
    small = req(size=SMALL)
    running = [admitted(core.admit(small)) for _ in range(2)]
    assert all(grant.admission == "per-request" for grant in running)
    first = core.admit(small)
    second = core.admit(small)
    assert isinstance(first, PendingRequest)
    assert isinstance(second, PendingRequest)
    over_principal = rejected(core.admit(small))
    assert over_principal.reason is RejectReason.PRINCIPAL_LIMIT
    bob = core.admit(req("bob", size=SMALL))
    assert isinstance(bob, PendingRequest)
    full = rejected(core.admit(req("carol", size=SMALL)))
    assert full.reason is RejectReason.REQUEST_QUEUE_FULL
    assert full.retry_after >= 1
    # A finished response promotes the oldest waiter into its place.
    assert core.report(running[0], Delivered(running[0].byte_range)) == [first.waiter_id]
    assert core.cancel_pending(first) is None  # already promoted: it holds a place
    expired = core.cancel_pending(bob)
    assert isinstance(expired, Rejected)
    assert expired.reason is RejectReason.REQUEST_WAIT_EXPIRED
    stats = core.stats()
    assert stats.request_active == 2
    assert stats.request_waiting == 1
    assert core.session_count == 0


def test_per_request_without_wait_rejects_when_places_are_taken() -> None:
    core, _ = make_core(max_downloads=1, transfer_queue_wait_seconds=0)
    admitted(core.admit(req(size=SMALL)))
    refused = rejected(core.admit(req("bob", size=SMALL)))
    assert refused.reason is RejectReason.REQUEST_QUEUE_FULL


# --- R-SESS-6: a slot is kept while bytes flow ---------------------------------------------


def test_slot_kept_while_a_response_is_in_flight_however_long() -> None:
    core, clock = make_core(idle_seconds=30)
    start(core, req())
    clock.advance(3600)
    core.tick()
    assert core.active_count == 1


def test_pause_longer_than_idle_seconds_frees_the_slot() -> None:
    core, clock = make_core(idle_seconds=30)
    alice = req(size=SIZE)
    deliver(core, admitted(ask(core, alice, span(0, CHUNK))))
    clock.advance(29.9)
    core.tick()
    assert core.active_count == 1
    clock.advance(0.2)
    core.tick()
    assert core.active_count == 0
    stats = core.stats()
    assert stats.paused == 1
    assert stats.idle_releases_total == 1
    assert_clean(core)


def test_progress_of_a_long_response_is_not_a_pause() -> None:
    core, clock = make_core(idle_seconds=30)
    grant = start(core, req())
    for _ in range(10):
        clock.advance(20)
        core.progress(grant, 100 * MIB)
        core.tick()
    assert core.active_count == 1


# --- R-SESS-7: no-shows ----------------------------------------------------------------------


def test_no_show_removed_after_check_at_plus_margin() -> None:
    core, clock = make_core(sessions=1)
    start(core, req("holder", download_id=None))
    answer = wait_in_queue(core, req("bob"))
    until_deadline = answer.check_at - clock.wall() + NO_SHOW_MARGIN_SECONDS
    clock.advance(until_deadline - 0.1)
    core.tick()
    assert core.waiting_count == 1
    clock.advance(0.2)
    core.tick()
    assert core.waiting_count == 0
    assert core.session_count == 1
    assert core.stats().no_shows_total == 1
    assert_clean(core)


def test_waiter_who_keeps_polling_is_never_a_no_show() -> None:
    core, clock = make_core(sessions=1)
    start(core, req("holder", download_id=None))
    bob = req("bob")
    wait_in_queue(core, bob)
    keep_polling(core, clock, [bob], 3600, every=30)
    assert core.waiting_count == 1
    assert core.stats().no_shows_total == 0


def test_no_show_rejoins_at_end() -> None:
    core, clock = make_core(sessions=1)
    start(core, req("holder", download_id=None))
    bob, carol = req("bob"), req("carol")
    wait_in_queue(core, bob)
    clock.advance(1)
    wait_in_queue(core, carol)
    keep_polling(core, clock, [carol], 60)  # bob does not come back
    assert core.stats().no_shows_total == 1
    assert position(core, carol) == 1
    back = wait_in_queue(core, bob)  # not refused: a new session at the end
    assert back.position == 2
    clock.advance(0.5)
    core.tick()
    assert position(core, bob) == 2
    assert position(core, carol) == 1
    assert_clean(core)


# --- R-SESS-8: completion --------------------------------------------------------------------


def test_download_completes_when_ranges_cover_start_to_last_byte() -> None:
    core, _ = make_core()
    alice = req(size=SIZE)
    for i in range(8):
        grant = admitted(ask(core, alice, span(i * CHUNK, (i + 1) * CHUNK)))
        assert core.active_count == 1
        deliver(core, grant)
    assert core.active_count == 0
    assert core.session_count == 0
    assert core.stats().completed_total == 1
    assert_clean(core)


def test_request_without_range_delivered_completes() -> None:
    core, _ = make_core()
    download_all(core, req(size=SIZE))
    assert core.session_count == 0
    assert core.stats().completed_total == 1


def test_tail_read_does_not_close_session() -> None:
    core, _ = make_core()
    alice = req(size=SIZE)
    deliver(core, admitted(ask(core, alice, suffix(CHUNK, SIZE))))
    assert core.active_count == 1
    # A bounded range ending at the last byte (a ZIP central directory) is a tail read too.
    deliver(core, admitted(ask(core, alice, span(SIZE - 2 * CHUNK, SIZE))))
    assert core.active_count == 1
    assert core.stats().completed_total == 0
    assert_clean(core)


def test_reading_the_end_first_then_the_rest_completes() -> None:
    core, _ = make_core()
    alice = req(size=SIZE)
    deliver(core, admitted(ask(core, alice, suffix(CHUNK, SIZE))))
    deliver(core, admitted(ask(core, alice, span(0, SIZE - CHUNK))))
    assert core.session_count == 0
    assert core.stats().completed_total == 1


def test_bounded_range_from_zero_to_last_byte_is_not_a_tail_read() -> None:
    core, _ = make_core()
    deliver(core, admitted(ask(core, req(size=SIZE), span(0, SIZE))))
    assert core.session_count == 0


def test_resume_mid_file_completes_without_prefix() -> None:
    core, _ = make_core()
    alice = req(size=SIZE)
    # curl -C - / wget -c: an open range from the saved offset sets the start.
    deliver(core, admitted(ask(core, alice, open_from(5 * CHUNK, SIZE))))
    assert core.active_count == 0
    assert core.stats().completed_total == 1


def test_start_is_the_smallest_offset_delivered() -> None:
    core, _ = make_core()
    alice = req(size=SIZE)
    body = admitted(ask(core, alice, open_from(4 * CHUNK, SIZE)))
    head = admitted(ask(core, alice, span(0, CHUNK)))
    deliver(core, head)
    deliver(core, body)
    # [0, 1) and [4, 8) chunks are delivered: the download started at 0, a gap remains.
    assert core.active_count == 1
    deliver(core, admitted(ask(core, alice, span(CHUNK, 4 * CHUNK))))
    assert core.active_count == 0
    assert core.stats().completed_total == 1


def test_interrupted_first_request_does_not_pin_the_start() -> None:
    """A whole-file GET dropped early, then ``curl -C -`` from where the client got to:
    the resumed download completes without the bytes before the offset (R-SESS-8)."""
    core, _ = make_core()
    alice = req(size=SIZE, download_id=None)
    interrupt(core, admitted(ask(core, alice)), sent=3 * CHUNK)
    deliver(core, admitted(ask(core, alice, open_from(3 * CHUNK, SIZE))))
    assert core.active_count == 0
    assert core.stats().completed_total == 1


def test_small_reads_walking_back_from_the_tail_stay_tail_reads() -> None:
    """A ZIP reader: the last 22 bytes, then 20 bytes just before them, then the
    central directory — none of these closes the session."""
    core, _ = make_core()
    zip_reader = req(size=SIZE, download_id=None)
    deliver(core, admitted(ask(core, zip_reader, suffix(22, SIZE))))
    deliver(core, admitted(ask(core, zip_reader, span(SIZE - 42, SIZE - 22))))
    assert core.active_count == 1
    assert core.stats().completed_total == 0
    deliver(core, admitted(ask(core, zip_reader, span(0, SIZE - 42))))
    assert core.active_count == 0
    assert core.stats().completed_total == 1


def test_not_complete_while_another_response_is_in_flight() -> None:
    core, _ = make_core()
    alice = req(size=SIZE)
    whole = admitted(ask(core, alice))
    extra = admitted(ask(core, alice, span(0, CHUNK)))
    deliver(core, whole)
    assert core.active_count == 1
    deliver(core, extra)
    assert core.active_count == 0
    assert core.stats().completed_total == 1


@pytest.mark.parametrize("how", ["interrupted", "failed"])
def test_interrupted_response_adds_no_bytes(how: str) -> None:
    core, _ = make_core()
    alice = req(size=SIZE)
    grant = admitted(ask(core, alice))
    if how == "interrupted":
        interrupt(core, grant, sent=SIZE - 1)
    else:
        fail(core, grant, sent=SIZE - 1)
    assert core.active_count == 1
    deliver(core, admitted(ask(core, alice, span(SIZE // 2, SIZE))))
    assert core.active_count == 1  # the first half was never delivered in full
    deliver(core, admitted(ask(core, alice, span(0, SIZE // 2))))
    assert core.active_count == 0
    assert core.stats().completed_total == 1
    assert_clean(core)


def test_more_than_64_scattered_ranges_only_delay_completion_to_idle() -> None:
    core, clock = make_core(idle_seconds=30)
    unit = MIB
    size = 130 * unit
    alice = req(size=size)
    for i in range(65):  # 65 disjoint ranges: the shortest (lowest) is forgotten
        deliver(core, admitted(ask(core, alice, span(2 * i * unit, (2 * i + 1) * unit))))
    assert_clean(core)  # at most 64 intervals
    for i in range(65):  # fill every gap: all bytes were delivered once
        deliver(core, admitted(ask(core, alice, span((2 * i + 1) * unit, (2 * i + 2) * unit))))
    assert core.active_count == 1  # never complete early …
    clock.advance(30.1)
    core.tick()
    assert core.active_count == 0  # … and the slot is freed on idle
    assert core.stats().completed_total == 0
    assert_clean(core)


# --- R-SESS-9: a pause keeps arrival and delivered ranges for 10 minutes --------------------


def _paused_behind_a_later_waiter(pause_seconds: float) -> tuple[int, int]:
    """Pat pauses; Quinn takes the slot; Rae arrives later; Pat returns after
    ``pause_seconds``. Returns the positions of Pat and Rae."""
    core, clock = make_core(sessions=2, idle_seconds=30)
    start(core, req("holder", download_id=None))
    pat, quinn, rae = req("pat", size=SIZE), req("quinn"), req("rae")
    deliver(core, admitted(ask(core, pat, span(0, CHUNK))))
    clock.advance(5)
    wait_in_queue(core, quinn)
    clock.advance(26)
    core.tick()  # pat paused, quinn marked
    assert core.stats().paused == 1
    admitted(ask(core, quinn))
    clock.advance(9)
    wait_in_queue(core, rae)
    keep_polling(core, clock, [rae], pause_seconds)
    answer = queued(ask(core, pat, span(CHUNK, 2 * CHUNK)))
    assert answer.position is not None or pause_seconds > 600
    clock.advance(0.5)
    core.tick()
    assert_clean(core)
    return position(core, pat), position(core, rae)


def test_pause_keeps_arrival_for_ten_minutes() -> None:
    assert _paused_behind_a_later_waiter(9 * 60) == (1, 2)


def test_pause_longer_than_ten_minutes_rejoins_at_end() -> None:
    assert _paused_behind_a_later_waiter(11 * 60) == (2, 1)


def test_pause_keeps_delivered_ranges() -> None:
    core, clock = make_core(sessions=1, idle_seconds=30)
    pat = req("pat", size=SIZE)
    deliver(core, admitted(ask(core, pat, span(0, CHUNK))))
    clock.advance(31)
    core.tick()
    assert core.active_count == 0
    clock.advance(8 * 60)
    # Nobody waits: the download continues at once and needs only the rest.
    deliver(core, admitted(ask(core, pat, span(CHUNK, SIZE))))
    assert core.session_count == 0
    assert core.stats().completed_total == 1


def test_paused_download_forgets_ranges_after_ten_minutes() -> None:
    core, clock = make_core(sessions=1, idle_seconds=30)
    pat = req("pat", size=SIZE)
    deliver(core, admitted(ask(core, pat, span(0, CHUNK))))
    clock.advance(31)
    core.tick()
    clock.advance(600)
    core.tick()
    assert core.session_count == 0
    deliver(core, admitted(ask(core, pat, span(CHUNK, SIZE))))
    assert core.active_count == 1  # a tail read of a new session: the prefix is gone
    assert core.stats().completed_total == 0


def test_returning_download_does_not_take_a_slot_marked_for_a_waiter() -> None:
    core, clock = make_core(sessions=2, idle_seconds=30)
    start(core, req("holder", download_id=None))
    pat, rae = req("pat", size=SIZE), req("rae")
    deliver(core, admitted(ask(core, pat, span(0, CHUNK))))
    clock.advance(10)
    wait_in_queue(core, rae)
    clock.advance(21)
    core.tick()  # pat's slot is free and marked for rae
    assert core.active_count == 1
    queued(ask(core, pat, span(CHUNK, 2 * CHUNK)))
    admitted(ask(core, rae))
    assert_clean(core)


# --- R-SESS-10: tail-only sessions -----------------------------------------------------------


def test_tail_only_session_released_after_five_seconds() -> None:
    core, clock = make_core(sessions=2, idle_seconds=30)
    tail_reader, reader = req("tail", size=SIZE), req("body", size=SIZE)
    deliver(core, admitted(ask(core, tail_reader, suffix(CHUNK, SIZE))))
    deliver(core, admitted(ask(core, reader, span(0, CHUNK))))
    clock.advance(4.9)
    core.tick()
    assert core.active_count == 2
    clock.advance(0.2)
    core.tick()
    assert core.active_count == 1  # only the tail reader let go
    assert core.stats().paused == 1
    assert core.principal_active("body") == 1
    assert_clean(core)


def test_tail_hold_is_not_longer_than_idle_seconds() -> None:
    core, clock = make_core(idle_seconds=3)
    deliver(core, admitted(ask(core, req(size=SIZE), suffix(CHUNK, SIZE))))
    clock.advance(2.9)
    core.tick()
    assert core.active_count == 1
    clock.advance(0.2)
    core.tick()
    assert core.active_count == 0


def test_tail_only_leaver_keeps_arrival_and_tail() -> None:
    core, clock = make_core(sessions=1, idle_seconds=30)
    zip_reader = req(size=SIZE)
    deliver(core, admitted(ask(core, zip_reader, suffix(CHUNK, SIZE))))
    clock.advance(5.1)
    core.tick()
    assert core.stats().paused == 1
    clock.advance(60)
    deliver(core, admitted(ask(core, zip_reader, span(0, SIZE - CHUNK))))
    assert core.session_count == 0
    assert core.stats().completed_total == 1


# --- R-SESS-11: responses per session --------------------------------------------------------


@pytest.mark.parametrize("limit", [4, 2])
def test_ranges_per_session_limits_concurrent_responses(limit: int) -> None:
    core, _ = make_core(ranges_per_session=limit)
    alice = req(size=SIZE, download_id=None)
    grants = [admitted(ask(core, alice, span(i * MIB, (i + 1) * MIB))) for i in range(limit)]
    refused = rejected(ask(core, alice, span(limit * MIB, (limit + 1) * MIB)))
    assert refused.reason is RejectReason.RANGES_PER_SESSION
    assert refused.retry_after >= 1
    deliver(core, grants[0])
    admitted(ask(core, alice, span(limit * MIB, (limit + 1) * MIB)))
    assert core.grants_in_flight() == limit
    assert core.active_count == 1


# --- R-SESS-12: marking ----------------------------------------------------------------------


def test_marks_twice_the_free_slots_and_first_marked_arrival_wins() -> None:
    core, clock = make_core(sessions=2)
    first = start(core, req("a"))
    start(core, req("b"))
    waiters = [req(f"w{i}") for i in range(1, 5)]
    for waiter in waiters:
        wait_in_queue(core, waiter)
        clock.advance(0.1)
    assert core.tick().marked == 0  # no slot free or finishing
    deliver(core, first)
    assert core.active_count == 1
    queued(ask(core, waiters[2]))  # a free slot, but no mark yet
    outcome = core.tick()
    assert outcome.marked == 2
    queued(ask(core, waiters[2]))  # not among the first two
    clock.advance(2)  # the head does not come within its poll period
    admitted(ask(core, waiters[1]))  # marked and first to come back
    late = queued(ask(core, waiters[0]))  # marked too, but the slot is gone
    assert late.retry_after == 1
    assert core.active_count == 2
    assert_clean(core)


def test_free_slot_goes_only_to_a_marked_waiter() -> None:
    core, clock = make_core(sessions=1)
    holder = start(core, req("holder"))
    bob = req("bob")
    wait_in_queue(core, bob)
    deliver(core, holder)
    queued(ask(core, bob))
    # A brand-new session does not jump the queue either.
    carol = req("carol")
    assert wait_in_queue(core, carol).position == 2
    clock.advance(0.5)
    core.tick()
    admitted(ask(core, bob))
    assert_clean(core)


def test_slots_finishing_within_five_seconds_count_as_free() -> None:
    core, _ = make_core(sessions=1)
    alice = req(size=SIZE)
    deliver(core, admitted(ask(core, alice, span(0, SIZE - CHUNK))))
    last = admitted(ask(core, alice, span(SIZE - CHUNK, SIZE)))  # 8 MiB left in flight
    for i in range(3):
        wait_in_queue(core, req(f"w{i}"))
    assert core.tick().marked == 2
    deliver(core, last)
    assert core.active_count == 0

    busy, _ = make_core(sessions=1)
    start(busy, req())  # gigabytes left: not finishing soon
    for i in range(3):
        wait_in_queue(busy, req(f"w{i}"))
    assert busy.tick().marked == 0


def test_marked_waiter_starts_with_its_own_range() -> None:
    core, clock = make_core(sessions=1)
    holder = start(core, req("holder"))
    bob = req("bob", size=SIZE)
    wait_in_queue(core, bob)
    deliver(core, holder)
    clock.advance(0.5)
    core.tick()
    grant = admitted(ask(core, bob, ByteRange(3 * CHUNK, SIZE, RangeKind.OPEN)))
    assert grant.byte_range == ByteRange(3 * CHUNK, SIZE, RangeKind.OPEN)
    deliver(core, grant)
    assert core.session_count == 0  # resumed from 3 chunks: complete


@pytest.mark.parametrize("how", ["interrupted", "failed"])
def test_cancelled_download_frees_its_slot_after_five_seconds(how: str) -> None:
    """R-SESS-6: cancellation frees the slot — after the short tail hold, not idleSeconds,
    so a retrying client keeps it but a client that gave up does not idle it for 30 s."""
    core, clock = make_core(sessions=1)
    grant = start(core, req("alice", download_id="a", byte_range=span(0, CHUNK)))
    (interrupt if how == "interrupted" else fail)(core, grant)
    clock.advance(4.0)
    core.tick()
    assert core.active_count == 1
    clock.advance(1.5)
    core.tick()
    assert core.active_count == 0
    assert core.stats().paused == 1
    assert core.debug_invariants() == []


def test_retry_after_interruption_keeps_the_full_idle_allowance() -> None:
    core, clock = make_core(sessions=1)
    request = req("alice", download_id="a", byte_range=span(0, CHUNK))
    interrupt(core, start(core, request))
    clock.advance(1.0)
    deliver(core, admitted(ask(core, request, span(0, CHUNK))))
    clock.advance(20.0)
    core.tick()
    assert core.active_count == 1


@pytest.mark.parametrize(
    ("parts", "digest"),
    [
        (("agent", "releases/big.iso", "dl-1", "192.0.2.1"), "daf05d34986eca499308d6328699d488"),
        (("agent", "releases/big.iso", None, "192.0.2.1"), "efdfb30ceb8245e91f9fc9aa72d12d5b"),
        (("pérson", "obj/ünï", None, "::1"), "0c277abca4aaa7af95224476584e1a85"),
        (("", "", "", ""), "88c2306b6a82158593e83858790ba5a8"),
        (("a\udcff", "b", "c", "d"), "aa8b3feea76e0a98c9ae22eef6a84e99"),
    ],
)
def test_session_keys_never_change(parts: tuple[str, str, str | None, str], digest: str) -> None:
    """Keys are stored in PostgreSQL: a process of a newer release must find the sessions
    an older one wrote, so the key of given parts is pinned."""
    assert session_key(*parts).hex() == digest
