"""The SQL of the leader's tick by name: an index of ``sql/tick.sql`` and ``sql/idle.sql``.

Reaping, idle release, expiry, aging, marks, the idle slots' count. Split from ``_sql``
(the statements of admissions, deliveries and the fleet) by who runs them; its
conventions hold here too.
``SET_MARKS`` and ``COUNT_EXPIRIES``, also in ``tick.sql``, are indexed there.
"""

from __future__ import annotations

from typing import Final

from ._statements import statement

REAP_EXPIRED: Final = statement("reap_expired")
PAUSE_ORPHANS: Final = statement("pause_orphans")
IDLE_SESSIONS: Final = statement("idle_sessions")
EXPIRE_NO_SHOWS: Final = statement("expire_no_shows")
EXPIRE_PAUSED: Final = statement("expire_paused")
FORGET_OLD_ROUNDS: Final = statement("forget_old_rounds")
FOLD_QUEUE_CHANGES: Final = statement("fold_queue_changes")
STATISTICS_BEHIND: Final = statement("statistics_behind")
ANALYSE_SESSIONS: Final = statement("analyse_sessions")
AGED_WAITERS: Final = statement("aged_waiters")
PROMOTE_AGED: Final = statement("promote_aged")
DEFER_AGING: Final = statement("defer_aging")
ACTIVE_FOR_ESTIMATE: Final = statement("active_for_estimate")
FLEET_SECONDS: Final = statement("fleet_seconds")
STORE_ESTIMATES: Final = statement("store_estimates")
CLASS_PASSES: Final = statement("class_passes")
PASSES_AND_GLOBAL: Final = statement("passes_and_global")
CLEAR_MARKS: Final = statement("clear_marks")
STORE_MARKS: Final = statement("store_marks")
SIGNAL_SLOT_FREE: Final = statement("signal_slot_free")
HEADS_OF_CLASS: Final = statement("heads_of_class")
WAITING_SIZES_OF_CLASS: Final = statement("waiting_sizes_of_class")
IDLE_SLOT_COUNTS: Final = statement("idle_slot_counts")
STORE_IDLE_SLOTS: Final = statement("store_idle_slots")
STORE_SESSIONS_IN_FORCE: Final = statement("store_sessions_in_force")
SESSIONS_IN_FORCE: Final = statement("sessions_in_force")
