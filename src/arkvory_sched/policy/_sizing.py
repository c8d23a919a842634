"""Slots that size themselves (issue #30, ADR 0038).

The right number of session slots depends on the clients. Fast clients fill the link
with few slots, and every slot more splits the link and pushes every finish later.
Clients limited on their own side (a thin line, a slow disk) leave the link part empty
however it is shared, and hold their slots the longer: only more slots keep the link
full and the queue moving. Under ``min_sessions`` the count moves between the
operator's bounds, a step at a time, by what the link carries and who holds the slots:

* **Spare link:** someone waits, every slot is held, and the link carries less than
  :data:`SPARE_SHARE` of its capacity: as many slots more as the held ones, at what
  each carries now, would take to bring it there (:func:`spare_slots`): at least one,
  at most as many again.
* **Limited clients:** someone waits, every slot is held, and fewer than
  :data:`HEADROOM` slots are held by sessions their clients do not limit
  (:func:`client_limited`): one slot more, for the session that fills the link.
* **Saturated:** the link carries :data:`SATURATED_SHARE` of its capacity or more and
  there are more slots than the limited sessions and the headroom: one slot fewer,
  once the slots held are no more than the count, so the count falls as sessions
  finish and never takes a slot from a running download.
* **Probing:** no link rate is configured, someone waits, every slot is held and the
  link carries what the store has measured it can: a measured rate is only what the
  clients took, and slow clients that hold every slot read as a full link. Slots more
  show which it is (:data:`PROBE_GAIN`): as many as wait, at most doubling the count.
  A probe that raised the delivery stays, and the next may follow; the slots of one
  that did not are taken back. No probe while fewer slots than the count have filled
  the link at this capacity (:attr:`SlotSizing.filled`): more would only split it.
* **Unused:** nobody waits and more slots stand empty than the headroom: one fewer,
  so that the count falls back after a slow crowd has gone.
* **In between, or too soon:** hold (hysteresis, :data:`STEP_SECONDS` between steps,
  no step down sooner than :data:`TURN_SECONDS` after a step up, and a change of
  direction at most once per :data:`TURN_SECONDS`: under a steady load the count
  settles instead of swinging).

The capacity is the configured link rate, or else the store's measured rate (the peak
of its busy seconds, ADR 0034), or else, on a cold server before a busy second is read,
the most the link has carried in a second so far: a crowd in which no client has shown
the link's rate for a minute cannot show spare link: only the limited-clients rule
opens slots, or a probe. Without the cold floor a fast crowd with no rate told waited
6 s for its first step, and its mean was 4.0 % over the best fixed count's instead of
0.4 %.

The controller is a pure function of its state and one reading, on the caller's
clock: the same readings give the same counts in every store.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import NamedTuple

from ._estimates import LinkRate

__all__ = [
    "DELIVERY_SECONDS",
    "HEADROOM",
    "LIMITED_SHARE",
    "PROBE_GAIN",
    "RATE_AGE_SECONDS",
    "RISING_SECONDS",
    "SATURATED_SHARE",
    "SPARE_SHARE",
    "STEP_SECONDS",
    "TURN_SECONDS",
    "SizingReading",
    "SizingReason",
    "SlotSizing",
    "client_limited",
    "held_pace",
    "rising_slots",
    "size_slots",
    "sizing_reading",
    "spare_slots",
    "start_sizing",
]

STEP_SECONDS = 1.0
"""Least time between two steps: a slot opened is taken within a second by a waiter at
the door, and its delivery shows in the next complete seconds."""
TURN_SECONDS = 60.0
"""Least time from a step up to a step down: under a steady load the count settles
instead of swinging (issue #30)."""
SPARE_SHARE = 0.90
"""Below this share of the capacity, with every slot held and someone waiting, the
link has room that only another slot can use."""
SATURATED_SHARE = 0.97
"""At or above this share the link is full: a slot more only splits it. The band to
:data:`SPARE_SHARE` is wider than the few per cent a delivery reading scatters."""
DELIVERY_SECONDS = 2
"""The complete seconds a reading's delivery is the mean of: a slot opened at one step
has delivered through them by the next."""
HEADROOM = 2
"""Slots beyond those the clients limit: one unlimited session fills what the limited
ones leave of the link, one more keeps it full across a handover."""
LIMITED_SHARE = 0.5
"""A session taking less than this share of an equal share of the capacity is limited
by its client, not by the link: its slot carries less than a slot could."""
PROBE_GAIN = 0.5
"""A probe's slot pays when the link carries at least this share of what a held slot
carried before it more: a link with room gives the new slot as much as the others
(all of it); a full one splits what it carried (nothing more). Half leaves room for a
reading's scatter either way."""
RISING_SECONDS = 3.0
"""How long after a step up the count is taken to be climbing (:func:`rising_slots`):
a spare step's own reading comes two complete seconds after it."""
RATE_AGE_SECONDS = 0.5
"""Least time a session has held its slot before its rate is read: its first tenths of
a second are its request's way, not its pace."""


class SizingReason(StrEnum):
    """Why the count is where it is: shown to operators, logged when it turns."""

    START = "start"
    """At the minimum, nothing read yet."""
    SPARE = "spare-link"
    """The link had room while every slot was held and someone waited."""
    LIMITED = "clients-limited"
    """Slots are held by sessions their clients limit, and someone waits: one slot more
    for a session that fills the link."""
    SATURATED = "saturated"
    """The link is full: the count falls back as sessions finish."""
    PROBE = "probing"
    """No link rate is configured and the link carries what was measured while every
    slot is held and someone waits: slots more show whether the link has room."""
    UNUSED = "slots-unused"
    """Nobody waits and slots stand empty beyond the headroom: the count falls back."""
    AT_MAXIMUM = "at-maximum"
    AT_MINIMUM = "at-minimum"


class SizingReading(NamedTuple):
    """What the store sees at a tick."""

    now: float
    waiting: int
    """How many wait for a slot: a probe opens no more slots than could be taken."""
    active: int
    """Slots held now."""
    delivery: float
    """Bytes per second the link carried over the last :data:`DELIVERY_SECONDS`."""
    capacity: float
    """What the link can carry, in bytes per second: the configured rate, else the
    measured one, else (a cold server, before a busy second is read) the most it has
    carried so far, a floor of what it can; 0.0 while it has carried nothing."""
    limited: int = 0
    """Active sessions their clients limit (:func:`client_limited`)."""
    delivery_since: float = float("-inf")
    """When the seconds ``delivery`` reads began: a step of more than one slot waits for
    a reading made wholly after the last step (:func:`size_slots`)."""
    capacity_told: bool = True
    """``capacity`` is the configured link rate (or more), not only a measurement of
    what the clients took: without it the controller probes (:class:`SizingReason`)."""


@dataclass(frozen=True, slots=True)
class SlotSizing:
    """The controller's state: the count in force and what it remembers."""

    count: int
    reason: SizingReason
    stepped_at: float
    """When the count last changed (or the controller started)."""
    raised_at: float = float("-inf")
    """When the count last rose: it falls no sooner than :data:`TURN_SECONDS` after."""
    direction: int = 0
    """+1 or -1: the last step's; 0 before any."""
    turned_at: float = float("-inf")
    """When the count last changed direction: it changes again no sooner than
    :data:`TURN_SECONDS` after."""
    limited_seen: tuple[tuple[float, int], ...] = ()
    """The readings of client-limited sessions of the last :data:`TURN_SECONDS` that no
    later reading exceeds, oldest (and largest) first: their first is the most in that
    minute. A reading scatters as fast sessions come and go, and the count falls only
    below what the slow ones have needed for a minute."""

    probe: tuple[int, float] | None = None
    """While a probe is read: the count before it and the delivery then."""
    probe_held_at: float = float("inf")
    """When every slot of the probe was first seen held: the reading that judges it
    begins no sooner (the seconds before carried less than its slots will)."""
    filled: tuple[float, int] | None = None
    """The capacity the link last showed full at, and the fewest slots held in a
    reading that carried it: with more slots than those, a probe would only split it.
    Forgotten when the capacity rises past it or falls below :data:`SPARE_SHARE` of it
    (the link, or its fastest clients, changed)."""

    @property
    def limited_recently(self) -> int:
        """The most sessions read as client-limited within the last minute."""
        return self.limited_seen[0][1] if self.limited_seen else 0


def client_limited(rates: Sequence[float | None], capacity: float) -> int:
    """How many of the active sessions their clients limit, from each one's rate
    (bytes per second over the time it has held its slot; ``None`` for one too new to
    read, :data:`RATE_AGE_SECONDS`): those below :data:`LIMITED_SHARE` of the fastest.

    On a shared link the sessions nothing limits get the same share, the highest; a
    session below half of it takes what its client can. A fast session is often too
    new to read (a 40 MB download at 40 MB/s lasts a second), so the sessions not read
    yet are taken to share what the read ones leave of ``capacity``.
    """
    read = [rate for rate in rates if rate is not None]
    unread = len(rates) - len(read)
    top = max(read, default=0.0)
    if unread and capacity > 0:
        top = max(top, (capacity - sum(read)) / unread)
    return sum(1 for rate in read if rate < LIMITED_SHARE * top)


def held_pace(sent: float, since: float | None, now: float) -> float | None:
    """A held slot's session's rate: the bytes it ``sent`` since it took the slot at
    ``since``, per second; ``None`` while it has held it less than
    :data:`RATE_AGE_SECONDS` (or the store does not know when it took it)."""
    if since is None or now - since < RATE_AGE_SECONDS:
        return None
    return sent / (now - since)


def sizing_reading(
    now: float,
    *,
    waiting: int,
    paces: Sequence[float | None],
    delivery: float,
    delivery_since: float,
    rate: LinkRate,
    carried: float,
    capacity_told: bool,
) -> SizingReading:
    """One store's reading at a tick: the held slots' :func:`held_pace` values, what the
    link carried over its last complete seconds from ``delivery_since``, and its
    capacity (``capacity_told``: the configured rate, not only a measurement); the
    sessions their clients limit are counted here, alike on every store.

    The capacity is the store's ``rate`` (unless it is a guess), and never less than
    the most the link has ``carried`` over the store's window, busy seconds or not: a
    probe's gain shows there before the rate, which reads only seconds in which
    someone waited."""
    capacity = max(rate.bytes_per_second if rate.known else 0.0, carried)
    return SizingReading(
        now,
        waiting,
        len(paces),
        delivery,
        capacity,
        client_limited(paces, capacity),
        delivery_since,
        capacity_told,
    )


def start_sizing(minimum: int, now: float) -> SlotSizing:
    """The state of a controller that starts now: the fewest slots. A fast crowd is
    best served by few, and a slow one shows within seconds."""
    return SlotSizing(minimum, SizingReason.START, now)


def size_slots(state: SlotSizing, reading: SizingReading, minimum: int, maximum: int) -> SlotSizing:
    """The state after ``reading``: the count moved by at most one, within
    ``minimum``..``maximum`` (the operator's bounds, which may have changed)."""
    bounded = min(max(state.count, minimum), maximum)
    if bounded != state.count:
        reason = SizingReason.AT_MINIMUM if bounded == minimum else SizingReason.AT_MAXIMUM
        return replace(state, count=bounded, reason=reason, stepped_at=reading.now)
    state = replace(
        state,
        limited_seen=_seen(state.limited_seen, reading),
        filled=_filled(state.filled, reading),
    )
    if reading.now - state.stepped_at < STEP_SECONDS:
        return state
    count, capacity = state.count, reading.capacity
    full = reading.waiting > 0 and reading.active >= count
    fresh = reading.delivery_since >= state.stepped_at
    if state.probe is not None:
        state, taken_back = _read_probe(state, reading, minimum)
        if taken_back is not None:
            return taken_back
    target = min(maximum, max(minimum, reading.limited + HEADROOM))
    if full and count < maximum and _may_turn(state, +1, reading.now):
        spare = capacity > 0 and reading.delivery < SPARE_SHARE * capacity
        probing = (
            not reading.capacity_told
            and fresh
            and state.probe is None
            and reading.delivery > 0
            and (state.filled is None or state.filled[1] >= count)
        )
        probe_by = max(1, min(count, reading.waiting, maximum - count)) if probing else 0
        spare_by = (spare_slots(reading, count, maximum) if fresh else 1) if spare else 0
        if spare and probe_by > spare_by:
            return _probe(state, reading, probe_by)
        if spare and (fresh or state.reason is not SizingReason.SPARE):
            # A reading partly from before the last step does not show what the slots
            # it opened carry: more than one slot on it opened 49 of 64 slots on
            # PostgreSQL, whose reading waits for every process's report, where 11
            # were enough. After a spare step, the next waits for a reading that
            # shows it: a slot a second on the readings between climbed from 6 to 20
            # in 15 s in the turning crowd without a rate told (1.41 times the
            # oracle's mean, 1.36 waiting).
            return _step(state, +1, SizingReason.SPARE, reading.now, spare_by)
        if count < target:
            return _step(state, +1, SizingReason.LIMITED, reading.now)
        if probe_by:
            return _probe(state, reading, probe_by)
    saturated = capacity > 0 and reading.delivery >= SATURATED_SHARE * capacity
    needed = max(target, state.limited_recently + HEADROOM)
    unused = not reading.waiting and count > max(needed, reading.active + HEADROOM)
    if (
        ((saturated and count > needed and reading.active <= count) or unused)
        and reading.now - state.raised_at >= TURN_SECONDS
        and _may_turn(state, -1, reading.now)
    ):
        reason = SizingReason.SATURATED if saturated else SizingReason.UNUSED
        return _step(state, -1, reason, reading.now)
    at_bound = (
        SizingReason.AT_MAXIMUM
        if full and count >= maximum
        else SizingReason.AT_MINIMUM
        if saturated and count <= minimum
        else None
    )
    if at_bound is not None and state.reason is not at_bound:
        return replace(state, reason=at_bound)
    return state


def rising_slots(state: SlotSizing | None, now: float, maximum: int) -> int:
    """Slots the count may open at its next step while it climbs: within
    :data:`RISING_SECONDS` of a step up, or while a probe is read, as many as the count
    (a step at most doubles it), never past ``maximum``; 0 otherwise, and for a fixed
    count (``state`` ``None``).

    The waiters who could take them are asked back soon (``answer_check_delay``): told
    their start on the count in force, the first waiters of the half-slow crowd without
    a rate told came back 9 s later, while the slots a probe had opened for them stood
    empty (issue #30, "Estimates use the effective count and its likely course")."""
    if state is None or state.direction != +1:
        return 0
    if state.probe is None and now - state.stepped_at > RISING_SECONDS:
        return 0
    return max(0, min(state.count, maximum - state.count))


def _probe(state: SlotSizing, reading: SizingReading, by: int) -> SlotSizing:
    """A probe of ``by`` slots, remembered for :func:`_read_probe`."""
    stepped = _step(state, +1, SizingReason.PROBE, reading.now, by)
    return replace(stepped, probe=(state.count, reading.delivery))


def _read_probe(
    state: SlotSizing, reading: SizingReading, minimum: int
) -> tuple[SlotSizing, SlotSizing | None]:
    """The state once the probe's reading is in, and the state that takes back the
    probe's slots that did not pay (``None`` when it paid, or when taking them back
    would turn the count sooner than :func:`_may_turn` allows: the saturated rule then
    lowers it in its time)."""
    assert state.probe is not None
    if reading.active < state.count:  # not all taken yet: read it when they are
        if reading.waiting:
            return state, None
        # Nobody came for them: it says nothing.
        return replace(state, probe=None, probe_held_at=math.inf), None
    if reading.now < state.probe_held_at:
        return replace(state, probe_held_at=reading.now), None
    if reading.delivery_since < state.probe_held_at:
        return state, None
    before, delivered = state.probe
    opened = state.count - before
    state = replace(state, probe=None, probe_held_at=math.inf)
    if opened <= 0:
        return state, None
    paid = (reading.delivery - delivered) * before / delivered  # slots' worth gained
    if paid >= PROBE_GAIN * opened:
        return state, None
    state = replace(state, filled=(reading.capacity, before))
    back = min(opened - max(0, math.floor(paid)), state.count - minimum)
    if back <= 0 or not _may_turn(state, -1, reading.now):
        return state, None
    return state, _step(state, -1, SizingReason.SATURATED, reading.now, back)


def _filled(filled: tuple[float, int] | None, reading: SizingReading) -> tuple[float, int] | None:
    """:attr:`SlotSizing.filled` after ``reading``."""
    capacity = reading.capacity
    if filled is not None and not (
        SPARE_SHARE * filled[0] <= capacity <= filled[0] / SATURATED_SHARE
    ):
        filled = None
    if capacity <= 0 or reading.delivery < SATURATED_SHARE * capacity:
        return filled
    if filled is None:
        return (capacity, reading.active)
    return (filled[0], min(filled[1], reading.active))


def _seen(
    seen: tuple[tuple[float, int], ...], reading: SizingReading
) -> tuple[tuple[float, int], ...]:
    """The sliding maximum of the limited readings over :data:`TURN_SECONDS`, with
    ``reading``'s: a reading drops the older ones it equals or exceeds."""
    kept = [(at, n) for at, n in seen if reading.now - at < TURN_SECONDS and n > reading.limited]
    return (*kept, (reading.now, reading.limited))


def spare_slots(reading: SizingReading, count: int, maximum: int) -> int:
    """How many slots a step on a spare link opens: as many as would bring the link to
    :data:`SPARE_SHARE` of its capacity if each carried what a held slot carries now;
    at least one (a reading of nothing says nothing), at most ``count`` (the count at
    most doubles in a step), never past ``maximum``.

    One slot a step took a minute to climb from 2 to 16 in the half-slow crowd: each
    opened slot must be taken by a waiter before the next step can see it held, and that
    is a poll away. The link the slow clients left empty meanwhile delayed every later
    client, and the mean completion was 1.14 times the oracle's (1.11 with this rule).
    """
    per_slot = reading.delivery / reading.active if reading.active else 0.0
    wanted = (
        int((SPARE_SHARE * reading.capacity - reading.delivery) / per_slot) if per_slot > 0 else 1
    )
    return max(1, min(wanted, count, maximum - count))


def _step(
    state: SlotSizing, direction: int, reason: SizingReason, now: float, by: int = 1
) -> SlotSizing:
    turned = state.direction not in (0, direction)  # a step back the other way
    return replace(
        state,
        probe=None,  # a step on the other rules' reading settles a probe
        probe_held_at=math.inf,
        count=state.count + direction * by,
        reason=reason,
        stepped_at=now,
        raised_at=now if direction > 0 else state.raised_at,
        direction=direction,
        turned_at=now if turned else state.turned_at,
    )


def _may_turn(state: SlotSizing, direction: int, now: float) -> bool:
    """A step in ``direction`` keeps the count from swinging: the same way as the last
    step, or the last change of direction a :data:`TURN_SECONDS` ago."""
    return (
        direction == state.direction
        or not state.direction
        or (now - state.turned_at >= TURN_SECONDS)
    )
