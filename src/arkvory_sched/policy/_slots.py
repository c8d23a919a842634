"""Who may take a slot, whom to mark for the next free ones, and who yields to whom.

R-CLASS-3 (the interactive reserve), R-CLASS-5 (the per-principal share with
contenders), R-SESS-12 (the marking budget and the back-up grace), R-PREEMPT-1..3, and
which free slots a waiter could take (the idle slots of issue #28).
Each store gathers the counts (live counters in memory, rows on PostgreSQL) and asks
these functions; none of them reads a clock: ``now`` comes in.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol, TypeVar

from .._classes import DownloadClass
from ._constants import (
    BACKUP_GRACE_SECONDS,
    FINISHING_SOON_SECONDS,
    IDLE_SLOT_GRACE_SECONDS,
    MARK_SCAN_SLACK,
    PREEMPT_MIN_HOLD_SECONDS,
)
from ._order import service_order

__all__ = [
    "MarkBudget",
    "YieldCandidate",
    "YieldHead",
    "YieldHolder",
    "backup_may_take_slot",
    "choose_marks",
    "choose_victim",
    "expected_soon",
    "finishing_soon",
    "held_at_the_door",
    "in_next_round",
    "keeps_its_turn",
    "marked_in_turn",
    "marking_budget",
    "next_slot_free",
    "over_share_with_contenders",
    "overdue_slot_may_be_taken",
    "slot_free_for",
    "usable_free_slots",
]

T = TypeVar("T")

_INTERACTIVE_RANK = DownloadClass.INTERACTIVE.rank


def over_share_with_contenders(principal_active: int, per_principal: int, contenders: bool) -> bool:
    """R-CLASS-5: a principal at its share takes no further slot while another principal
    below its share waits (``contenders``)."""
    return contenders and principal_active >= per_principal


def slot_free_for(
    *,
    sessions: int,
    reserve: int,
    active: int,
    active_interactive: int,
    interactive: bool,
    over_share: bool,
) -> bool:
    """Whether a waiter may take a slot now: one is free, a non-interactive waiter does
    not take the interactive reserve (R-CLASS-3), and it is not over its share while
    others contend (``over_share``, :func:`over_share_with_contenders`)."""
    if active >= sessions:
        return False
    if not interactive and active - active_interactive >= sessions - reserve:
        return False
    return not over_share


def usable_free_slots(
    *,
    sessions: int,
    reserve: int,
    active: int,
    active_interactive: int,
    waiting_by_class: Sequence[int],
    room: Sequence[int | None] = (),
) -> int:
    """How many free slots some waiting session could take now (issue #28): the slots
    left idle while someone waits. 0 when nobody waits or every slot is held.

    ``waiting_by_class`` counts the waiters by base class rank. A slot counts when some
    waiting class may take it: the interactive reserve only for a waiting interactive
    session (R-CLASS-3), and for a class outside its windows only as many as it may
    still take there (``room``, :meth:`ClassGate.room`; none given: no windows,
    R-WIN-2). The per-principal share (R-CLASS-5) and a yielder's block (R-PREEMPT-2)
    are left out: while they bind, another waiter — the contender, the head — may take
    the slot, so it is idle all the same.
    """
    free = sessions - active
    if free <= 0:
        return 0
    free_noninteractive = min(free, max(0, sessions - reserve - (active - active_interactive)))
    usable = 0
    for rank, waiting in enumerate(waiting_by_class):
        if not waiting:
            continue
        slots = free if rank == _INTERACTIVE_RANK else free_noninteractive
        limit = room[rank] if room else None
        if limit is not None:
            slots = min(slots, limit)
        usable = max(usable, slots)
    return usable


def finishing_soon(remaining: int, per_session_rate: float, yield_requested: bool) -> bool:
    """R-SESS-12: a slot counts as (about to be) free when its session finishes within
    five seconds at its share of the rate, or has been asked to yield."""
    return yield_requested or remaining / per_session_rate <= FINISHING_SOON_SECONDS


@dataclass(frozen=True, slots=True)
class MarkBudget:
    """How many waiters a tick marks: twice the (soon) free slots, and of those at most
    twice the free non-interactive slots for non-interactive waiters."""

    free: int
    total: int
    noninteractive: int

    @property
    def scan_limit(self) -> int:
        """Waiters a marking may look at, passing over those that may not take a slot."""
        return 4 * self.total + MARK_SCAN_SLACK


def marking_budget(
    *,
    sessions: int,
    reserve: int,
    active: int,
    active_interactive: int,
    soon: int,
    soon_interactive: int,
) -> MarkBudget:
    """The budget of R-SESS-12 from the slot counts; ``soon`` per :func:`finishing_soon`.

    ``free`` is what the store announces as free at the marking (never negative).
    """
    free_total = sessions - active + soon
    free_ni = sessions - reserve - (active - active_interactive) + (soon - soon_interactive)
    if free_total <= 0:
        return MarkBudget(0, 0, 0)
    return MarkBudget(free_total, 2 * free_total, 2 * max(0, free_ni))


def choose_marks(
    heads: Sequence[Sequence[T]],
    passes: Sequence[float],
    strides: Sequence[float],
    budget: MarkBudget,
    may_take: Callable[[T], bool],
    closed: Sequence[bool] = (),
) -> list[tuple[T, bool]]:
    """The waiters to mark, in service order, each with whether it is a back-up.

    Rank 0 holds only interactive waiters (aging never lifts into it), so every other
    rank spends the non-interactive budget; once that is spent, those classes are
    skipped. ``may_take`` passes over a waiter that may not take a slot (blocked
    behind a head it yielded to, over its share while others contend, or of a class
    outside its windows). ``closed[rank]`` skips a rank whose every waiter is of a
    class outside its windows (:func:`~._gate.closed_ranks`): a crowd waiting for its
    window is not scanned, and does not use up the scan limit the others need.
    """
    total, noninteractive = budget.total, budget.noninteractive
    if total <= 0:
        return []
    allowed = [True] + [noninteractive > 0] * (len(heads) - 1)
    for rank, skip in enumerate(closed):
        if skip:
            allowed[rank] = False
    limit = budget.scan_limit
    chosen: list[tuple[T, bool]] = []
    for scanned, (rank, waiter) in enumerate(service_order(heads, passes, strides, allowed)):
        if scanned >= limit:
            break
        if not may_take(waiter):
            continue
        chosen.append((waiter, len(chosen) >= budget.free))
        total -= 1
        if rank:
            noninteractive -= 1
            if noninteractive <= 0:
                for other in range(1, len(allowed)):
                    allowed[other] = False
        if total <= 0:
            break
    return chosen


def backup_may_take_slot(now: float, last_release: float) -> bool:
    """A back-up mark takes a freed slot only when none of the first marked waiters (who
    poll every second) came for it within one such poll period."""
    return now - last_release >= BACKUP_GRACE_SECONDS


def marked_in_turn(
    *, earlier_waiting: int, free: int, backup: bool, now: float, last_release: float
) -> bool:
    """Whether a marked waiter that comes takes a free slot now (R-SESS-12, issue #28).

    Marks go out in service order, and a tick marks twice as many waiters as slots are
    (about to be) free. Taken first come, first served, the head lost its slot to
    whichever marked waiter polled first after a release: in a crowd of 20 to 60 MB
    objects the first waiter of the queue started 7 s after the fourth, and every
    start promised by the order was missed. So the first ``free`` marked waiters still
    waiting (``earlier_waiting`` counts those marked before this one) take the free
    slots at once; anyone marked further down, back-ups included, once none of them
    came within one of their poll periods of the last release. Only the marked
    waiters that :func:`keeps_its_turn` are counted: one told to come back much later,
    long overdue, or back only after the next slot frees would hold a free slot for
    nobody.
    """
    if backup_may_take_slot(now, last_release):
        return True
    return not backup and earlier_waiting < free


def in_next_round(own_ahead: int, sessions: int) -> bool:
    """Whether a waiter with ``own_ahead`` waiters of its class before it could take
    the next freed slot: fewer are ahead than there are slots. A slot left free goes to
    such a waiter only: anyone further back taking it would start before the waiters
    the order promised it to (the opening of scenario 4's night window: p95 of the
    estimates 1.40 of the bound, 0.39 in order)."""
    return own_ahead < sessions


def held_at_the_door(
    position: int | None, starts_earliest: float, now: float, *, sessions: int, hold: float
) -> bool:
    """Whether a waiter that sent a download id is held by the server, as a request
    without one is (R-HOLD-2, issue #28): it is in the next round (``position`` at most
    ``sessions``) and its slot may free within the hold.

    Told to come back in whole seconds (``Retry-After``), the next waiter reached a freed
    slot half a second late on average: with nine slots turning over five times a
    second, a fifth of the gate's slot-seconds idled while hundreds waited. Held at the
    door, it takes the slot the moment it frees. Only the next round is held, so a
    process keeps at most about ``sessions`` such requests open.

    A newcomer is held too when its place is in the next round: told to come back in
    2 s (R-EST-3) while a slot freed within the second, it left that slot empty. Where
    the queue is short, as when a crowd begins or the count of slots rises (issue #30),
    that was most handovers: the half-slow crowd of simulation scenario 6 left 3 % of
    its link unused while someone waited, and completed at 1.11 times the oracle's mean
    (1.08 held). ``position`` ``None``: no place known, never held.
    """
    if position is None or hold <= 0:
        return False
    return position <= sessions and starts_earliest - now <= hold


def expected_soon(check_at: float, now: float) -> bool:
    """Whether a waiter asked back at ``check_at`` is due within one poll period of a
    marked waiter either side of ``now`` (:data:`BACKUP_GRACE_SECONDS`)."""
    return abs(check_at - now) <= BACKUP_GRACE_SECONDS


def keeps_its_turn(
    check_at: float, back_at: float, now: float, next_free: float, *, slack: float = 0.0
) -> bool:
    """Whether a marked waiter still waiting keeps a free slot from those marked after
    it (:func:`marked_in_turn`'s ``earlier_waiting`` counts it; issue #28).

    It keeps its turn when its ``check_at`` is within a poll period of now
    (:func:`expected_soon`) and it is back before the next slot is expected to free
    (``next_free``, the earliest end of a running session at its share of the rate).
    ``back_at`` is when its last answer's ``Retry-After`` brings it back: whole seconds,
    rounded up, so up to a second after ``check_at`` (a waiter asked back in 1.05 s is
    told 2 s, and judged by ``check_at`` it kept a slot idle for that second).
    One due back later than that loses nothing by the slot going to a marked waiter who
    is here: when it comes, that next slot is there for it. Kept for it instead, the
    slot idled until it came: in the gate's crowd, whose nine slots change hands five
    times a second, the first marked waiter was still asleep on its ``Retry-After`` at
    42 % of the handovers, and those handovers left the slot empty 0.19 s each, 4.4 %
    of all slot-seconds. Where sessions last minutes the next slot frees long after
    any marked waiter is due, and the order holds exactly as before.

    ``slack``: how long after it is back the next slot must free for the turn to be kept
    (ADR 0043). A shared store passes :data:`NEXT_SLOT_SLACK_SECONDS`: there a waiter
    comes back in whole seconds after its ``checkAt`` and each poll costs the primary
    statements, so asking it back sooner is not an answer (ADR 0041). In one run of the
    gate's crowd on PostgreSQL, slots so kept, while other marked waiters at the door
    were refused, made 16.5 of its 38.9 idle slot-seconds, and the next slot freed a
    moment after each sleeper came. The in-memory store, whose marked waiters come at
    their ``checkAt``, passes none.
    """
    return expected_soon(check_at, now) and back_at + slack < next_free


def next_slot_free(finishes: Iterable[float], now: float) -> float:
    """When the next slot is expected to free: the first of the running sessions'
    expected ends (``finishes``, as in a finish table) after ``now``; infinity when no
    session runs. An end already past is a slot that freed, not the next one."""
    return min((finish for finish in finishes if finish > now), default=math.inf)


def overdue_slot_may_be_taken(now: float, last_release: float) -> bool:
    """A slot freed while waiters wait and left free: none of the marked waiters came
    for it within :data:`IDLE_SLOT_GRACE_SECONDS` of the last release, so the first
    eligible waiter of the next round (:func:`in_next_round`) that comes takes it,
    marked or not (issue #28). Waiting for the marked ones longer would leave the link
    idle while someone is at the door.

    Counted from the last release, a slot among many that free every fraction of a
    second never looks overdue (the gate's nine slots of 8 MiB downloads idled up to
    11 s; ADR 0034 says why the tick's notice of an idle slot is not used instead)."""
    return now - last_release >= IDLE_SLOT_GRACE_SECONDS


@dataclass(frozen=True, slots=True)
class YieldHead:
    """The first waiter that may take a slot, as preemption sees it."""

    principal: str
    queue_rank: int
    interactive: bool
    principal_active: int


class YieldHolder(Protocol):
    """An active session as preemption sees it (read only).

    The in-memory store passes its sessions as they are (no value built per tick);
    the PostgreSQL leader passes a :class:`YieldCandidate` per active row.
    """

    @property
    def principal_name(self) -> str: ...
    @property
    def base_rank(self) -> int: ...
    @property
    def principal_active(self) -> int: ...
    @property
    def slot_since(self) -> float: ...
    @property
    def has_id(self) -> bool: ...
    @property
    def yield_requested(self) -> bool: ...


class YieldCandidate(NamedTuple):
    """A :class:`YieldHolder` from plain values; ``ref`` is the store's handle of it."""

    ref: bytes
    principal_name: str
    base_rank: int
    principal_active: int
    slot_since: float
    has_id: bool
    yield_requested: bool


H = TypeVar("H", bound=YieldHolder)


def choose_victim(
    candidates: Iterable[H], head: YieldHead, *, now: float, per_principal: int
) -> H | None:
    """R-PREEMPT-1..3: the active session asked to yield its slot to ``head``, or None.

    Only a protocol client (with a download id) not already asked, of another
    principal, holding its slot for at least a minute, of a lower class than the head
    — or above its share while the head's principal is below — and never an
    interactive session for a non-interactive head. Among those: the lowest class,
    then the one holding its slot longest.
    """
    head_below_share = head.principal_active < per_principal
    victim: H | None = None
    for candidate in candidates:
        if not candidate.has_id or candidate.yield_requested:
            continue
        if candidate.principal_name == head.principal:
            continue
        if now - candidate.slot_since < PREEMPT_MIN_HOLD_SECONDS:
            continue
        lower_class = candidate.base_rank > head.queue_rank
        above_share = head_below_share and candidate.principal_active > per_principal
        if not (lower_class or above_share):
            continue
        if not head.interactive and candidate.base_rank == 0:
            continue
        if victim is None or (candidate.base_rank, -candidate.slot_since) > (
            victim.base_rank,
            -victim.slot_since,
        ):
            victim = candidate
    return victim
