"""Taking a slot on the shared queue: the claim, and what decides whether one may.

A claim is one statement (``CLAIM_SLOT``) that takes a free slot within the limits,
the interactive reserve and, outside a class's windows, its share of slots (R-WIN-2).
Before it: a marked back-up's grace and the per-principal share (R-CLASS-5) judged on
the queue as it is now. Also the order key and aging time of a session that (re-)enters
the queue, which the admission path writes with it.
"""

from __future__ import annotations

import asyncpg

from .._classes import DownloadClass
from .._early_polls import EarlyPolls
from ..policy import (
    BACKUP_GRACE_SECONDS,
    NEXT_SLOT_SLACK_SECONDS,
    class_ages,
    exact_head,
    in_next_round,
    marked_in_turn,
    over_share_with_contenders,
    overdue_slot_may_be_taken,
    promote_at,
    smallest_first_key,
)
from ..settings import Strategy
from . import _sql as sql
from ._estimates import QueueSnapshots
from ._leases import Lease, LeaseCache
from ._meters import Meters
from ._running import Running

__all__ = ["Claims"]


class Claims:
    """Claims of slots for this process, and a waiter's order and aging."""

    def __init__(
        self,
        running: Running,
        leases: LeaseCache,
        snapshots: QueueSnapshots,
        early: EarlyPolls,
        meters: Meters,
        *,
        node: str,
        lease_seconds: float,
    ) -> None:
        self._running = running
        self._leases = leases
        self._snapshots = snapshots
        self._early = early
        self._meters = meters
        self._node = node
        self._lease_seconds = lease_seconds

    async def start_outside_window(
        self,
        conn: asyncpg.Connection,
        key: bytes,
        row: asyncpg.Record,
        cls: DownloadClass,
        now: float,
    ) -> Lease | None:
        """A newcomer of a class outside its windows with a share of slots (R-WIN-2).

        ``admit_session`` cannot count the class's slots, so it queued the newcomer;
        alone in the queue it starts as in memory, the claim counting them.
        """
        if not self._running.settings.class_windows:
            return None
        cap = self._running.class_gate().caps[cls.rank]
        if cap is None or cap <= 0 or await conn.fetchval(sql.OTHERS_WAITING, key):
            return None
        lease = await self.claim(conn, key, row, now)
        if lease is not None:
            self._running.invalidate()
        return lease

    async def slot_left_free(self, conn: asyncpg.Connection, now: float) -> bool:
        """Whether a slot looks free past the idle grace (issue #28), on the snapshot
        this process read last (half a second old at most, dropped by every change
        made here): it rules out nearly every poll without a statement of its own."""
        snapshot = await self._snapshots.read(conn)
        return snapshot.active < self._running.settings.sessions and overdue_slot_may_be_taken(
            now, snapshot.last_release
        )

    async def _in_next_round(self, conn: asyncpg.Connection, key: bytes) -> bool:
        """As in memory (:func:`~arkvory_sched.policy.in_next_round`): its place in its
        class, exact near the head; one statement, when a slot has been left free."""
        sessions = self._running.settings.sessions
        placed = await conn.fetchrow(sql.POSITION, key, exact_head(sessions))
        return placed is not None and in_next_round(placed["own_ahead"], sessions)

    async def may_take_slot(
        self, conn: asyncpg.Connection, key: bytes, row: asyncpg.Record, now: float, began: float
    ) -> bool:
        """As in memory: a marked waiter (a back-up after its grace), or any waiter once a
        slot has been left free past the idle grace (issue #28); then the per-principal
        share with the contenders waiting now (R-CLASS-5). The claim checks the slots."""
        if await self.slot_left_free(conn, now) and await self._in_next_round(conn, key):
            if await conn.fetchval(sql.SESSION_BLOCKED, key):
                return False
        elif not row["marked"]:
            return False
        else:
            # In the tick's order: the first marked waiters expected soon take the free
            # slots; the rest, back-ups included, once none of them came within one of
            # their poll periods (as in memory, ADR 0002, issue #28). The queue as of
            # this request: the snapshot it read already, or one read now (ADR 0040).
            snapshot = await self._snapshots.read(conn, fresh_since=began)
            order = snapshot.marked_order
            earlier = list(order[: order.index(key)]) if key in order else []
            # Each keeps its turn only if due back before the next slot frees, by the
            # shared store's slack (policy.keeps_its_turn, ADR 0043), which the
            # statement reads off the slots.
            rate = snapshot.rate(self._running.settings.bandwidth).bytes_per_second
            per_session = rate / max(1, snapshot.active)
            waiting_before = (
                await conn.fetchval(
                    sql.MARKED_EXPECTED,
                    earlier,
                    now,
                    BACKUP_GRACE_SECONDS,
                    per_session,
                    NEXT_SLOT_SLACK_SECONDS,
                )
                if earlier
                else 0
            )
            if not marked_in_turn(
                earlier_waiting=waiting_before,
                free=self._running.settings.sessions - snapshot.active,
                backup=row["mark_backup"],
                now=now,
                last_release=snapshot.last_release,
            ):
                return False
        # The mark is a tick old: whether the share binds is judged on the queue as it
        # is now, not as the tick saw it.
        per_principal = self._running.settings.per_principal
        share = await conn.fetchrow(sql.CLAIMANT_SHARE, row["principal"], per_principal)
        return not over_share_with_contenders(
            share["principal_active"], per_principal, share["contenders"]
        )

    async def claim(
        self,
        conn: asyncpg.Connection,
        key: bytes,
        row: asyncpg.Record,
        now: float,
    ) -> Lease | None:
        """Take a free slot for ``key`` in one statement; None when none is free.

        ``row`` needs the session's ``base_class``, ``object_size`` and
        ``arrival_wall_ms``. The claim and the round's advance commit together (inside
        a caller's transaction, as a savepoint, so a lost race for the session ends
        without aborting it). A newcomer's claim happens inside ``admit_session``.
        """
        settings = self._running.settings
        cls = DownloadClass.by_rank(row["base_class"])
        # R-WIN-2: outside its windows a class takes at most its share of slots; with
        # none there is nothing to claim, with some the claims of the class take turns
        # and the statement counts them.
        cap = self._running.class_gate().caps[cls.rank] if settings.class_windows else None
        if cap is not None and cap <= 0:
            return None
        try:
            async with conn.transaction():
                if cap is not None:
                    await conn.execute(sql.LOCK_CLASS_CLAIMS, cls.rank)
                claimed = await conn.fetchrow(
                    sql.CLAIM_SLOT,
                    key,
                    settings.sessions,
                    cls is DownloadClass.INTERACTIVE,
                    settings.reserve,
                    self._node,
                    self._lease_seconds,
                    now,
                    cap,
                    cls.rank,
                )
                if claimed is None:
                    return None
                rank = claimed["queue_rank"]
                tag = int(claimed["order_key"]) if settings.strategy is Strategy.ORDERED else 0
                await conn.execute(sql.ADVANCE_ROUND, rank, tag, 1.0 / settings.weights[rank], now)
        except asyncpg.UniqueViolationError:
            return None  # another process activated this session at the same moment
        return self.remember_claim(key, claimed, row, now)

    def remember_claim(
        self, key: bytes, claimed: asyncpg.Record, session: asyncpg.Record, now: float
    ) -> Lease:
        """A slot this process just claimed: its wait is measured, its lease trusted.

        ``claimed`` is the claim (``CLAIM_SLOT``'s row, or ``admit_session``'s, which is
        also ``session``); ``session`` gives the class, size and arrival. A wait with a
        first estimate is scored for its kind of client (``has_id``, which only
        ``CLAIM_SLOT`` returns: a newcomer ``admit_session`` starts had no estimate).
        """
        cls = DownloadClass.by_rank(session["base_class"])
        self._early.forget(key)
        self._meters.wait_histograms[cls.rank].observe(max(0.0, now - claimed["waiting_since"]))
        first_estimate = claimed["first_estimate"]
        estimated_at = claimed.get("first_estimate_at")
        if first_estimate is not None and estimated_at is not None:
            self._meters.estimates.score(
                estimated_at, first_estimate, now, has_id=claimed["has_id"]
            )
        return self._leases.remember(
            key,
            slot_no=claimed["slot_no"],
            token=claimed["lease_token"],
            download_class=cls,
            object_size=session["object_size"],
            arrival_wall_ms=session["arrival_wall_ms"],
            seconds_left=claimed["lease_left"],
            held=True,
            claimed=True,
        )

    async def order_key(
        self,
        conn: asyncpg.Connection,
        rank: int,
        principal: str,
        size: int,
        arrival: float,
    ) -> float:
        """The session's place within its class under the current strategy: under
        ``ordered`` the round-robin turn for its arrival (``ROUND_TAG``, migration 0007)."""
        settings = self._running.settings
        if settings.strategy is Strategy.SMALLEST_FIRST:
            return smallest_first_key(size, arrival, settings.aging_minutes * 60.0)
        tag = await conn.fetchval(sql.ROUND_TAG, rank, principal, arrival)
        return float(tag)

    def promote_at(self, rank: int, since: float) -> float | None:
        """When a session entering the queue in its base class ``rank`` ages, counting
        from ``since``: a newcomer's arrival (a ticket's old one too), or the moment a
        resumed or yielding session waits again (as in memory)."""
        settings = self._running.settings
        if not class_ages(settings.class_windows, rank):
            return None  # a class with windows does not age (ADR 0021)
        return promote_at(since, rank, rank, settings.aging_minutes * 60.0)
