"""Each held slot's share of the link, for the finish table and the schedule (R-EST-1).

A slot held by a client that takes far less than its share (a phone on a weak link,
``curl --limit-rate``) leaves the rest of the link to the others: they finish sooner
than an equal share says, and the slot it holds frees later. Read with equal shares, a
crowd in which a tenth of the clients took a tenth of their share started its first
waiters 2 to 3 s before they were told, over waits of 17 to 30 s (issue #28;
simulation scenario 5 on PostgreSQL, 1.1 to 1.5 times the error bound).

So a session that has held its slot long enough to show its pace
(:data:`SHARE_PACE_AGE_SECONDS`) and takes less than :data:`LIMITED_SHARE` of an equal
share is expected to go on at its own pace, and the others share what it leaves. The
rule is the one the self-sizing slots use to count the sessions their clients limit
(ADR 0038), so the two read a crowd alike.

The waiters are scheduled on the slots of the sessions not limited, at that faster
share (:meth:`SlotShares.tables`). Some of them will be limited too: such a
one takes a slot but next to nothing of the link, and the other slots go faster for
it. Which ones is not known before they start; how many is, in the long run: by
Little's law the limited sessions' share of the slots is their share of the sessions
that start times how much longer each holds its slot (:attr:`SlotShares.limited_share`).
Without it the schedule charged every waiter its full size, and the crowd's waiters of
a minute later started 5 % before they were told (scenario 5 in memory, 200 clients).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, NamedTuple

from ._estimates import finish_table
from ._sizing import LIMITED_SHARE

__all__ = [
    "LIMITED_FLOOR_SHARE",
    "SHARE_PACE_AGE_SECONDS",
    "SlotShares",
    "sending_pace",
    "slot_shares",
]

SHARE_PACE_AGE_SECONDS: Final = 2.0
"""Least time a session has held its slot before its pace says it is limited: its first
second shows its request's way and the server's start as much as its client."""
LIMITED_FLOOR_SHARE: Final = 1 / 32
"""A limited session is expected to move at least this share of an equal share: a
client that stalls says when it took its last bytes, not when it will take the rest,
and read at its pace a stalled holder put a waiter's start centuries away."""


class SlotShares(NamedTuple):
    """What each held slot and each slot still to be taken move, in bytes per second."""

    held: list[float]
    """Each active session's rate, in the order its pace was given."""
    per_slot: float
    """A slot's rate for a waiter that starts later, on the slots of the sessions not
    limited (:meth:`tables`)."""
    limited: list[bool]
    """Whether each active session is limited by its client."""
    limited_share: float
    """The share of the sessions that start that their clients limit, as the held slots
    say it (the module's docstring); 0.0 with none limited."""

    def tables(
        self, remaining: Sequence[int], now: float, sessions: int
    ) -> tuple[list[float], list[float]]:
        """The finish table (:func:`finish_table`: each held slot at its rate, ``now`` for
        a free one) and the table the waiters are scheduled on (:func:`queue_schedule`):
        the same but for the slots the limited sessions hold, each slot at
        :attr:`per_slot` once its session ends. With none limited they are one list.

        The slots the limited sessions hold are left out of the schedule, though they
        free some day: a waiter who takes one shares the link with the others, and the
        link carries no more for it. Scheduled at :attr:`per_slot` after the limited
        sessions' ends, the crowd's later waiters were told starts as if the link were
        faster, and started 23 s after them over waits of 120 s (scenario 5 in memory).
        """
        finishes = finish_table(remaining, self.held, now, sessions)
        slow = sum(self.limited)
        if not slow or slow >= sessions:
            return finishes, finishes
        kept = [
            (left, rate)
            for left, rate, limited in zip(remaining, self.held, self.limited, strict=True)
            if not limited
        ]
        schedule = finish_table(
            [left for left, _ in kept], [rate for _, rate in kept], now, sessions - slow
        )
        return finishes, schedule


def slot_shares(
    paces: Sequence[tuple[float, float] | None],
    rate: float,
    sessions: int,
    *,
    known: bool = True,
) -> SlotShares:
    """Each held slot's rate and a later session's, on a link of ``rate``.

    ``paces`` holds, per active session, ``(bytes per second, seconds held)`` since it
    took its slot, or ``None`` where the store cannot say. A limited session (see the
    module's docstring) keeps its pace; the rest of the link is shared equally by the
    other active sessions, and by the ``sessions`` slots less the limited ones for the
    waiters. With none limited this is the equal share: ``rate`` over the active
    sessions, and over ``sessions`` for the waiters.

    Only a session that has sent bytes is judged (one that sent none has not shown a
    pace: its first bytes may not be reported yet), and only against a rate that is
    ``known`` (against a guess, every pace could read slow or fast).
    """
    count = len(paces)
    equal = rate / max(1, count)
    limited = [
        known
        and pace is not None
        and pace[0] > 0
        and pace[1] >= SHARE_PACE_AGE_SECONDS
        and pace[0] < LIMITED_SHARE * equal
        for pace in paces
    ]
    floor = LIMITED_FLOOR_SHARE * equal
    own = [
        max(pace[0], floor) if pace and is_slow else None
        for pace, is_slow in zip(paces, limited, strict=True)
    ]
    slow_paces = [pace for pace in own if pace is not None]
    if not slow_paces:
        return SlotShares([equal] * count, rate / max(1, sessions), limited, 0.0)
    slow = len(slow_paces)
    # Each limited pace is below half an equal share: at least half the link is left.
    left = rate - sum(slow_paces)
    unlimited = left / max(1, count - slow)
    held = [unlimited if pace is None else pace for pace in own]
    return SlotShares(
        held,
        left / max(1, sessions - slow),
        limited,
        _started_share(slow / count, unlimited * slow / sum(slow_paces)),
    )


def _started_share(held_share: float, longer: float) -> float:
    """The share of starting sessions that are limited, from their share of the held
    slots and how many times longer each holds its slot (Little's law: held share
    ``a`` = ``φ·k / (φ·k + 1 − φ)``, solved for ``φ``).

    With every held slot limited there is nothing to compare them with, and the
    waiters are charged their full sizes: read as all limited, a crowd's waiters were
    told they all start now."""
    if held_share >= 1.0:
        return 0.0
    return held_share / (longer * (1.0 - held_share) + held_share)


def sending_pace(
    sent: float, since: float | None, until: float | None
) -> tuple[float, float] | None:
    """What :func:`slot_shares` reads of one held slot: the bytes its session ``sent``
    since it took the slot at ``since``, per second up to ``until`` (when that count is
    whole), and those seconds. ``until`` ``None``: the session is not sending now, and
    between two ranges a client is not slow; ``None`` then, as for a slot of unknown
    age."""
    if until is None or since is None or until <= since:
        return None
    return sent / (until - since), until - since
