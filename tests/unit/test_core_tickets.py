"""Queue tickets through the core (R-TICKET-1..3) and its two clocks (R-RES-5)."""

from __future__ import annotations

from typing import Any

from arkvory_sched import Admitted, DownloadRequest, Queued, TicketSigner
from arkvory_sched.memory._core import SchedulerCore
from arkvory_sched.testing import FakeClock

from ._helpers import (
    CHUNK,
    TICKET_KEY,
    admitted,
    ask,
    assert_clean,
    deliver,
    keep_polling,
    key_of,
    make_core,
    position,
    queued,
    req,
    span,
    start,
    wait_in_queue,
)

SIZE = 8 * CHUNK


def _arrival_ms(ticket: str | None) -> int:
    assert ticket is not None
    return int(ticket.split(".")[1], 36)


def _issued_ms(ticket: str | None) -> int:
    assert ticket is not None
    return int(ticket.split(".")[2], 36)


def _ticket(answer: Queued) -> str:
    assert answer.ticket is not None
    return answer.ticket


def _restart(clock: FakeClock, **settings: Any) -> SchedulerCore:
    """A new process with the same ticket key; its only slot is taken at once."""
    core, _ = make_core(clock=clock, tickets=True, sessions=1, **settings)
    start(core, req("holder", download_id=None))
    return core


def _two_waiters(clock: FakeClock) -> tuple[DownloadRequest, str, DownloadRequest, str]:
    """Alice waits, Bob ten seconds later, in a first process; returns their tickets."""
    core = _restart(clock)
    alice, bob = req("alice"), req("bob")
    alice_ticket = _ticket(wait_in_queue(core, alice))
    clock.advance(10)
    bob_ticket = _ticket(wait_in_queue(core, bob))
    clock.advance(30)
    return alice, alice_ticket, bob, bob_ticket


def _positions_after_restart(
    clock: FakeClock,
    alice: DownloadRequest,
    alice_ticket: str,
    bob: DownloadRequest,
    bob_ticket: str,
) -> tuple[int, int]:
    """Bob is back first, Alice a second later; the positions after the next tick."""
    core = _restart(clock)
    queued(ask(core, bob, ticket=bob_ticket))
    clock.advance(1)
    queued(ask(core, alice, ticket=alice_ticket))
    clock.advance(0.5)
    core.tick()
    assert_clean(core)
    return position(core, alice), position(core, bob)


# --- R-TICKET-1: issue and return -------------------------------------------------------------


def test_no_ticket_without_a_key() -> None:
    core, _ = make_core(sessions=1)
    first = ask(core, req("a"))
    assert isinstance(first, Admitted)
    assert first.ticket is None
    assert wait_in_queue(core, req("b")).ticket is None


def test_ticket_reissued_with_every_answer_keeping_arrival() -> None:
    clock = FakeClock()
    core = _restart(clock)
    alice = req("alice")
    arrived_ms = int(clock.wall() * 1000)
    first = _ticket(wait_in_queue(core, alice))
    assert _arrival_ms(first) == arrived_ms
    assert _issued_ms(first) == arrived_ms
    clock.advance(100)
    later = _ticket(queued(ask(core, alice)))
    assert _arrival_ms(later) == arrived_ms
    assert _issued_ms(later) == arrived_ms + 100_000
    assert later != first


def test_admitted_answers_carry_a_ticket_too() -> None:
    clock = FakeClock()
    core, _ = make_core(clock=clock, tickets=True)
    first = ask(core, req(size=SIZE), span(0, CHUNK))
    assert isinstance(first, Admitted)
    assert _arrival_ms(first.ticket) == int(clock.wall() * 1000)


def test_new_core_with_same_key_puts_download_at_its_old_arrival() -> None:
    clock = FakeClock()
    alice, alice_ticket, bob, bob_ticket = _two_waiters(clock)
    assert _positions_after_restart(clock, alice, alice_ticket, bob, bob_ticket) == (1, 2)


def test_restored_download_keeps_announcing_its_old_arrival() -> None:
    clock = FakeClock()
    alice, alice_ticket, _, _ = _two_waiters(clock)
    core = _restart(clock)
    answer = queued(ask(core, alice, ticket=alice_ticket))
    assert _arrival_ms(answer.ticket) == _arrival_ms(alice_ticket)


def test_without_a_ticket_a_restart_queues_anew() -> None:
    clock = FakeClock()
    alice, _, bob, bob_ticket = _two_waiters(clock)
    core = _restart(clock)
    queued(ask(core, bob, ticket=bob_ticket))
    clock.advance(1)
    queued(ask(core, alice))
    clock.advance(0.5)
    core.tick()
    assert position(core, alice) == 2


def test_ticketed_downloads_of_one_principal_keep_their_order() -> None:
    clock = FakeClock()
    core = _restart(clock)
    first, second = req("ci", "a", download_id="d1"), req("ci", "b", download_id="d2")
    first_ticket = _ticket(wait_in_queue(core, first))
    clock.advance(10)
    second_ticket = _ticket(wait_in_queue(core, second))
    clock.advance(30)
    restarted = _restart(clock)
    queued(ask(restarted, second, ticket=second_ticket))  # the later one is back first
    clock.advance(1)
    queued(ask(restarted, first, ticket=first_ticket))
    clock.advance(0.5)
    restarted.tick()
    assert position(restarted, first) == 1
    assert position(restarted, second) == 2


# --- R-TICKET-2 / R-TICKET-3: what is not accepted ------------------------------------------


def test_tampered_ticket_ignored() -> None:
    clock = FakeClock()
    alice, alice_ticket, bob, bob_ticket = _two_waiters(clock)
    version, arrival, issued, signature = alice_ticket.split(".")
    earlier = _base36(int(arrival, 36) - 3_600_000)
    moved = f"{version}.{earlier}.{issued}.{signature}"
    assert _positions_after_restart(clock, alice, moved, bob, bob_ticket) == (2, 1)


def test_ticket_with_altered_signature_ignored() -> None:
    clock = FakeClock()
    alice, alice_ticket, bob, bob_ticket = _two_waiters(clock)
    flipped = alice_ticket[:-2] + ("A" if alice_ticket[-2] != "A" else "B") + alice_ticket[-1]
    assert _positions_after_restart(clock, alice, flipped, bob, bob_ticket) == (2, 1)


def test_ticket_for_another_download_ignored() -> None:
    clock = FakeClock()
    core = _restart(clock)
    mine = req("alice", "obj", download_id="d1")
    ticket = _ticket(wait_in_queue(core, mine))
    clock.advance(10)
    bob = req("bob")
    bob_ticket = _ticket(wait_in_queue(core, bob))
    clock.advance(30)
    # The same principal, another download id: the ticket does not move over.
    other = req("alice", "obj", download_id="d2")
    restarted = _restart(clock)
    queued(ask(restarted, bob, ticket=bob_ticket))
    clock.advance(1)
    answer = queued(ask(restarted, other, ticket=ticket))
    assert _arrival_ms(answer.ticket) == int(clock.wall() * 1000)
    clock.advance(0.5)
    restarted.tick()
    assert position(restarted, other) == 2
    assert key_of(other) != key_of(mine)


def test_ticket_signed_with_another_key_ignored() -> None:
    clock = FakeClock()
    alice, _, bob, bob_ticket = _two_waiters(clock)
    foreign = TicketSigner([b"another-installation-key-0123456"])
    issued = int(clock.wall() * 1000)
    forged = foreign.issue(key_of(alice), issued - 3_600_000, issued)
    assert _positions_after_restart(clock, alice, forged, bob, bob_ticket) == (2, 1)


def test_ticket_older_than_fifteen_minutes_ignored() -> None:
    clock = FakeClock()
    alice, alice_ticket, bob, _ = _two_waiters(clock)
    clock.advance(15 * 60 + 1)
    core = _restart(clock)
    queued(ask(core, bob))
    clock.advance(1)
    answer = queued(ask(core, alice, ticket=alice_ticket))
    assert _arrival_ms(answer.ticket) == int(clock.wall() * 1000)


def test_ticket_cannot_claim_an_arrival_in_the_future() -> None:
    clock = FakeClock()
    core = _restart(clock)
    alice = req("alice")
    now_ms = int(clock.wall() * 1000)
    ahead = TicketSigner([TICKET_KEY]).issue(key_of(alice), now_ms + 60_000, now_ms + 60_000)
    answer = queued(ask(core, alice, ticket=ahead))
    assert _arrival_ms(answer.ticket) == now_ms


def test_ticket_from_a_node_up_to_two_minutes_ahead_is_accepted() -> None:
    clock = FakeClock()
    core = _restart(clock)
    alice = req("alice")
    now_ms = int(clock.wall() * 1000)
    signer = TicketSigner([TICKET_KEY])
    fast_node = signer.issue(key_of(alice), now_ms - 5 * 60_000, now_ms + 110_000)
    answer = queued(ask(core, alice, ticket=fast_node))
    assert _arrival_ms(answer.ticket) == now_ms - 5 * 60_000
    too_fast = signer.issue(key_of(req("bob")), now_ms - 5 * 60_000, now_ms + 130_000)
    refused = queued(ask(core, req("bob"), ticket=too_fast))
    assert _arrival_ms(refused.ticket) == now_ms


def test_wait_longer_than_a_day_keeps_its_place() -> None:
    clock = FakeClock()
    core = _restart(clock)
    alice, bob = req("alice"), req("bob")
    wait_in_queue(core, alice)
    arrived_ms = int(clock.wall() * 1000)
    keep_polling(core, clock, [alice], 3600, every=20)
    wait_in_queue(core, bob)
    answers = keep_polling(core, clock, [alice, bob], 25 * 3600, every=20)
    latest = _ticket(answers[alice])
    assert _arrival_ms(latest) == arrived_ms
    restarted = _restart(clock)
    queued(ask(restarted, bob, ticket=_ticket(answers[bob])))
    clock.advance(1)
    queued(ask(restarted, alice, ticket=latest))
    clock.advance(0.5)
    restarted.tick()
    assert position(restarted, alice) == 1


# --- R-RES-5: the queue runs on the monotonic clock ------------------------------------------


def test_wall_clock_jump_does_not_reset_the_queue() -> None:
    clock = FakeClock()
    core = _restart(clock)
    alice, bob = req("alice"), req("bob")
    wait_in_queue(core, alice)
    wait_in_queue(core, bob)
    clock.advance(0.5)
    core.tick()
    before = queued(ask(core, alice))
    wait_before = before.starts_at - clock.wall()
    for jump in (-3600.0, 86_400.0):
        clock.jump_wall(jump)
        clock.advance(0.5)
        outcome = core.tick()
        assert outcome.expired == 0
        assert core.waiting_count == 2
        assert core.active_count == 1
        assert position(core, alice) == 1
        assert position(core, bob) == 2
        answer = queued(ask(core, alice))
        # Announced times follow the new wall clock; the wait itself did not move.
        assert abs((answer.starts_at - clock.wall()) - wait_before) < 5
        assert _arrival_ms(answer.ticket) == _arrival_ms(before.ticket)
        assert _issued_ms(answer.ticket) >= _arrival_ms(answer.ticket)
    assert_clean(core)


def test_wall_clock_jump_neither_holds_nor_frees_slots() -> None:
    clock = FakeClock()
    core, _ = make_core(clock=clock, sessions=2, idle_seconds=30)
    alice = req("alice", size=SIZE)
    deliver(core, admitted(ask(core, alice, span(0, CHUNK))))
    clock.jump_wall(86_400)  # a day forward: not a pause of a day
    core.tick()
    assert core.active_count == 1
    clock.jump_wall(-2 * 86_400)  # a day back: the pause still ends on time
    clock.advance(31)
    core.tick()
    assert core.active_count == 0
    assert core.stats().paused == 1
    clock.jump_wall(10 * 86_400)  # the kept arrival does not expire early either
    core.tick()
    assert core.session_count == 1


def _base36(value: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        value, digit = divmod(value, 36)
        out = digits[digit] + out
        if value == 0:
            return out
