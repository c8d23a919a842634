"""Start estimates, when to ask again, and honest Retry-After values (R-EST-1..3).

Pure arithmetic on counts and times. The in-memory store passes its live counters, the
PostgreSQL store the snapshot its leader leaves every tick; both pass ``now``.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Iterable, Sequence
from typing import NamedTuple, Protocol

from ._constants import (
    EARLY_POLL_MIN_SECONDS,
    EARLY_POLL_SHARE,
    ESTIMATE_MIN_SPREAD_SECONDS,
    ESTIMATE_SPREAD,
    FALLBACK_RATE,
    HEAD_MIN_CHECK_SECONDS,
    JITTER_HIGH,
    JITTER_LOW,
    MAX_CHECK_SECONDS,
    MAX_REQUEST_RETRY_SECONDS,
    MIN_CHECK_SECONDS,
    NEWCOMER_CHECK_SECONDS,
    NO_SHOW_MARGIN_SECONDS,
    UNKNOWN_RATE_CHECK_SECONDS,
    UNKNOWN_RATE_SPREAD,
)
from ._gate import StartEstimate
from ._requests import Strategy

__all__ = [
    "LinkRate",
    "answer_check_delay",
    "bound_check_delay",
    "busy_retry_after",
    "check_delay",
    "early_poll",
    "estimate_interval",
    "estimate_rate",
    "estimate_start",
    "finish_table",
    "jitter",
    "no_show_at",
    "queue_schedule",
    "queued_retry_after",
    "request_retry_after",
    "scheduled",
    "taken_since",
]


class LinkRate(NamedTuple):
    """The delivery rate estimates use, and whether anything backs it."""

    bytes_per_second: float
    known: bool
    """False while nothing is configured and nothing has been measured: the rate is
    :data:`FALLBACK_RATE`, a guess, and the answers say so (a wide interval, a short
    check delay)."""

    @property
    def measured(self) -> float:
        """The rate as an operator should read it: 0.0 while it is a guess."""
        return self.bytes_per_second if self.known else 0.0


def estimate_rate(
    measured: float, last: float, bandwidth: int | None, provisional: float = 0.0
) -> LinkRate:
    """The delivery rate estimates use (R-EST-1, issue #28, ADR 0034).

    ``measured`` is the store's reading now and ``last`` the last one it had; both count
    only seconds with the slots busy (:class:`~arkvory_sched._rate.BusySeconds`). The
    configured ``bandwidth`` is the prior: a reading may raise the rate above it (the
    link is faster than the operator said) and never lowers it (a reading below the
    link's rate is the clients', taken while the link had room). With nothing
    configured the reading is the rate; with nothing read either, the rate is a guess,
    raised by ``provisional``: what the link carried in any second so far, or in the
    delivery run so far (a cold server's first seconds, before three busy ones could be
    read). A guess is never lowered by it: a tiny read says nothing.
    """
    reading = measured or last
    if bandwidth is not None:
        return LinkRate(max(float(bandwidth), reading), True)
    if reading > 0:
        return LinkRate(reading, True)
    return LinkRate(max(float(FALLBACK_RATE), provisional), False)


def finish_table(
    remaining: Iterable[int], rates: Iterable[float], now: float, sessions: int
) -> list[float]:
    """When each slot frees (R-EST-1): the active sessions' remaining bytes at their
    rates (:func:`~arkvory_sched.policy.slot_shares`), and ``now`` for every free slot;
    sorted."""
    finishes = [now + left / rate for left, rate in zip(remaining, rates, strict=True)]
    finishes.extend([now] * max(0, sessions - len(finishes)))
    finishes.sort()
    return finishes


def queue_schedule(
    table: Sequence[float],
    sizes: Iterable[float],
    per_slot_rate: float,
    *,
    followers: int = 0,
    limited_share: float = 0.0,
) -> list[float]:
    """When each of the first waiters starts, in service order, by their own sizes
    (R-EST-1, issue #28), and then ``followers`` more.

    ``table`` is the finish table (:func:`finish_table`: one entry per slot, ``now`` for
    a free one) and ``sizes`` the bytes of the waiters in the order they are served.
    Each waiter takes the slot that frees first and holds it for its own size at a
    slot's share of the link (list scheduling). Counting every later round at the mean
    waiting download put a crowd of 20 to 60 MB objects at p95 2.5 times the error
    bound: a round ends when the sizes in it say, not the mean.

    The followers are waiters of the scheduled ones' mean size behind them: whoever
    comes between two schedules stands there, and is told the start of the place it
    takes. Read off the finish table instead, a newcomer behind 65 waiters was told the
    third slot's end plus four rounds, 5 s after the schedule's last start: the
    simulation's third-party tools, whose scored answer is a newcomer's, were at p95
    1.15 of the bound for it, and 0.87 with a round of followers.

    ``limited_share`` is the share of the sessions that start whose clients limit them
    (:class:`~arkvory_sched.policy.SlotShares`): such a session takes a slot but next
    to nothing of the link, and the others' slots go faster for it, so each waiter is
    charged its size less that share.
    """
    frees = list(table)
    heapq.heapify(frees)
    starts: list[float] = []
    if not frees:
        return starts
    served = [size * (1.0 - limited_share) for size in sizes]
    follower = sum(served) / len(served) if served else 0.0
    for size in itertools.chain(served, itertools.repeat(follower, followers if served else 0)):
        start = heapq.heappop(frees)
        starts.append(start)
        heapq.heappush(frees, start + size / per_slot_rate)
    return starts


class _ScheduleRules(Protocol):
    """What :func:`scheduled` reads of the settings."""

    @property
    def strategy(self) -> Strategy: ...
    @property
    def class_windows(self) -> object: ...


def scheduled(rules: _ScheduleRules) -> bool:
    """Whether the first waiters' starts come from :func:`queue_schedule`: under
    ``ordered`` without class windows. A closed class does not take the slots the order
    gives it; under ``smallest-first`` every smaller newcomer moves ahead, and starts
    promised to the byte made the largest object of scenario 3 wait 864 s instead of
    261 s (its waiters came back later): the mean per round stays there."""
    return rules.strategy is Strategy.ORDERED and not rules.class_windows


def estimate_start(
    table: Sequence[float],
    *,
    ahead: int,
    now: float,
    sessions: int,
    reserve: int,
    interactive: bool,
    active: int,
    active_interactive: int,
    waiting: int,
    waiting_bytes: float,
    rate: float,
    schedule: Sequence[float] = (),
    own_start: float | None = None,
    table_at: float = -math.inf,
) -> float:
    """When the waiter with ``ahead`` others before it starts (R-EST-1/2).

    Slots free at the times of the sorted finish ``table`` (a slot missing from a table
    shorter than ``sessions`` is free now); after one round of usable slots, each
    further round takes the mean waiting download's time on its share of the link,
    unless the ``schedule`` of the first waiters (:func:`queue_schedule`) says when
    this one starts. A non-interactive waiter neither counts nor is promised the
    reserve (R-EST-2).

    ``own_start`` is this waiter's own entry in that schedule, found by who it is
    rather than by ``ahead``: the schedule was made at the last tick, and every waiter
    that started since has left ``ahead`` but not the schedule. Read by ``ahead``, a
    waiter was told the start of one who stood a round before it: in a crowd whose
    first rounds free their slots together, nine waiters start between two ticks, and
    the answers right after came 3 to 4 s early, at twice their bound (issue #28).

    The table was made at ``table_at`` (the last tick), ``active`` is as the slots are
    now: a slot the table holds free may have been taken since (:func:`taken_since`).
    """
    mean_size = waiting_bytes / max(1, waiting)
    table = taken_since(table, table_at, now, sessions, active, mean_size, rate)
    usable = max(1, sessions if interactive else sessions - reserve)
    skip = 0
    if not interactive:
        free = max(0, sessions - active)
        free_ni = max(0, sessions - reserve - (active - active_interactive))
        skip = free - min(free, free_ni)
    missing = max(0, sessions - len(table))  # free now, ahead of every finish
    usable = min(usable, missing + len(table) - skip)
    if usable <= 0:
        usable, first = 1, now
        cycles, index = ahead, 0
    else:
        cycles, index = divmod(ahead, usable)
        position = skip + index
        first = now if position < missing else table[position - missing]
    if cycles or not skip:
        if own_start is not None:
            return max(now, own_start)
        if ahead < len(schedule):
            return max(now, schedule[ahead])
    service = waiting_bytes / max(1, waiting) * usable / rate
    return max(now, first + cycles * service)


def taken_since(
    table: Sequence[float],
    made_at: float,
    now: float,
    sessions: int,
    active: int,
    mean_size: float,
    rate: float,
) -> Sequence[float]:
    """``table``, made at ``made_at``, with the slots it held free but taken since read
    as held by a session that just began: it ends a mean download's time at a slot's
    share of ``rate`` from ``now`` (issue #28).

    The finish table is made at a tick, and the sessions that started after it are in
    ``active`` but not in the table. On a cold server every slot fills in the tick's
    second: the waiters who came next were told "now" with all slots taken, and started
    2 s later, at 1.1 to 1.2 times their bound; a fifth of the first second's waiters.
    Only the slots free when the table was made are read so (a slot missing from a
    short table was free too): an entry that came due since is a session ending about
    now or one running late, and "now" is the better guess for both.
    """
    free_when_made = max(0, sessions - len(table)) + sum(1 for end in table if end <= made_at)
    taken = free_when_made - max(0, sessions - active)
    if taken <= 0:
        return table
    padded = sorted([now] * max(0, sessions - len(table)) + list(table))
    began = now + mean_size / (rate / max(1, sessions))
    return sorted([began] * taken + padded[taken:])


def estimate_interval(start: float, now: float, *, known: bool = True) -> tuple[float, float]:
    """The announced interval around ``start``: ±12 % of the wait, at least ±2 s, never
    before now.

    Made on a guessed rate (``known`` false), it spans what the wait would be were the
    link :data:`UNKNOWN_RATE_SPREAD` times faster or slower: a wait is the time to move
    bytes, so it scales with one over the rate.
    """
    wait = start - now
    spread = max(ESTIMATE_MIN_SPREAD_SECONDS, ESTIMATE_SPREAD * wait)
    earliest, latest = max(now, start - spread), start + spread
    if not known:
        earliest = min(earliest, now + wait / UNKNOWN_RATE_SPREAD)
        latest = max(latest, now + wait * UNKNOWN_RATE_SPREAD)
    return earliest, latest


def jitter(key: bytes) -> float:
    """A per-download factor in [0.9, 1.1): spreads polls so they do not arrive in a crowd.

    Derived from the session key, so one download keeps its rhythm across polls while
    different downloads drift apart.
    """
    return JITTER_LOW + (JITTER_HIGH - JITTER_LOW) * (key[0] / 256.0)


def check_delay(
    key: bytes,
    *,
    newcomer: bool,
    ahead: int,
    wait: float,
    marked: bool,
    free_at_mark: int,
    polls_are_free: bool = False,
) -> float:
    """Seconds until the waiter should ask again (R-EST-3): ``checkAt`` and Retry-After.

    A newcomer comes back after 2 s; others halfway to their start, spread per
    download, at least 1 s (head or marked) or 2 s, at most 300 s. A waiter marked for
    a slot that is (about to be) free comes at once; marked back-ups further down keep
    their pace, so they rarely overtake.

    Where a poll costs the store nothing (``polls_are_free``: in memory), any marked
    waiter is asked back in whole seconds, rounded down. ``Retry-After`` is whole
    seconds rounded up (:func:`queued_retry_after`), so a marked waiter of the second
    round asked back in 1.2 s was told 2 s and came back 0.8 s after its ``checkAt``:
    in the gate's mixed crowd, whose nine slots change hands five times a second, its
    slot had often freed meanwhile and waited for it, since it kept its turn
    (:func:`keeps_its_turn`). Back on time, it is at the door when the slot frees
    (issue #28). On PostgreSQL each waiter held at the door costs statements on the
    primary every process shares, and in the same crowd the extra door time cost the
    link more than the idle time it saved (ADR 0041).
    """
    if newcomer:
        return NEWCOMER_CHECK_SECONDS
    floor = HEAD_MIN_CHECK_SECONDS if ahead == 0 or marked else MIN_CHECK_SECONDS
    # Clamp first, then spread: a crowd whose waits all exceed the cap must still not
    # poll in the same second every five minutes.
    halfway = min(MAX_CHECK_SECONDS / JITTER_HIGH, max(floor, wait / 2))
    delay = max(floor, halfway * jitter(key))
    if marked and ahead < free_at_mark:
        delay = HEAD_MIN_CHECK_SECONDS
    elif marked and polls_are_free:
        delay = float(math.floor(delay))  # at least HEAD_MIN_CHECK_SECONDS, a whole second
    return delay


def bound_check_delay(
    delay: float, *, now: float, earliest: float, next_round: bool, known: bool
) -> float:
    """The check delay, so that no slot idles while someone waits (issue #28).

    A waiter of the next round (one that could take the next freed slot) is asked back
    no later than the optimistic end of its interval, the earliest moment that slot
    may free: then it is there when the slot frees, or is told anew. On a guessed rate
    every waiter asks again within :data:`UNKNOWN_RATE_CHECK_SECONDS`, by when the
    rate has been read. Never below the head's one second.
    """
    if next_round:
        delay = min(delay, max(HEAD_MIN_CHECK_SECONDS, earliest - now))
    if not known:
        delay = min(delay, UNKNOWN_RATE_CHECK_SECONDS)
    return delay


def answer_check_delay(
    estimate: StartEstimate,
    key: bytes,
    *,
    now: float,
    newcomer: bool,
    marked: bool,
    free_at_mark: int,
    sessions: int,
    rising: int = 0,
    polls_are_free: bool = False,
) -> float:
    """Seconds until a waiter told ``estimate`` asks again, as both stores answer it:
    :func:`check_delay`, no later than its class's opening allows, and for a waiter of
    the next round no later than its earliest start (:func:`bound_check_delay`; a
    newcomer keeps its 2 s, R-EST-3). While the self-sizing count climbs, ``rising``
    slots more may open at its next step (``rising_slots``): a waiter who could take
    one asks again within :data:`NEWCOMER_CHECK_SECONDS`. ``polls_are_free``: see
    :func:`check_delay`."""
    delay = estimate.window.check_delay(
        check_delay(
            key,
            newcomer=newcomer,
            ahead=estimate.ahead,
            wait=estimate.start - now,
            marked=marked,
            free_at_mark=free_at_mark,
            polls_are_free=polls_are_free,
        ),
        jitter(key),
    )
    delay = bound_check_delay(
        delay,
        now=now,
        earliest=estimate.earliest,
        next_round=not newcomer and estimate.ahead < sessions,
        known=estimate.known,
    )
    if rising and estimate.ahead < sessions + rising:
        delay = min(delay, NEWCOMER_CHECK_SECONDS)
    return delay


def queued_retry_after(delay: float) -> int:
    """``Retry-After`` for a waiter asked to come back in ``delay`` seconds: whole
    seconds, rounded up, at least 1.

    Never before ``checkAt``: a closed class's waiter is asked back by its opening, and
    one that came half a second early would find the class still closed (rounding to
    the nearest second left the link idle after an opening in simulation scenario 4).
    """
    return max(1, math.ceil(delay))


def early_poll(now: float, check_at: float, delay: float) -> bool:
    """Whether a waiter asking at ``now`` comes well before the ``check_at`` it was given
    ``delay`` seconds before it (issue #26; ADR 0029).

    A client that follows ``Retry-After`` never does: the value is rounded up, the SDK
    adds a positive jitter, and a delta in seconds knows no clock skew. The tolerance
    covers what is left — a timer that fires a little early, a sleep stepped through on
    the wall clock (R-CLIENT-5) — and grows with the delay. Small enough that a waiter
    asked back after 1 s (the head of the queue) is early for three quarters of it.
    """
    tolerance = max(EARLY_POLL_MIN_SECONDS, EARLY_POLL_SHARE * delay)
    return now < check_at - tolerance


def no_show_at(check_at: float, delay: float) -> float:
    """R-SESS-7: a waiter that has not come back by then is a no-show."""
    return check_at + max(NO_SHOW_MARGIN_SECONDS, delay)


def busy_retry_after(waiting_bytes: float, waiting: int, rate: float) -> int:
    """An honest wait for a full queue: about one mean waiting download's time on the
    link, 2..300 s."""
    seconds = waiting_bytes / max(1, waiting) / rate
    return int(min(MAX_CHECK_SECONDS, max(MIN_CHECK_SECONDS, math.ceil(seconds))))


def request_retry_after(request_seconds: float, waiting: int, places: int) -> int:
    """Per-request queue full: the time for the queue ahead to drain, 1..60 s."""
    backlog = (waiting + 1) / max(1, places)
    seconds = request_seconds * max(1.0, backlog)
    return int(min(MAX_REQUEST_RETRY_SECONDS, max(1, math.ceil(seconds))))
