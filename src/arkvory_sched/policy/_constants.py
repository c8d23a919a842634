"""Every constant of the scheduling policy, defined once for both stores.

Not settings: they shape the protocol (SPEC §3, §6, §8), so an operator cannot change
them and both implementations must agree on them to the second.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "AGING_CAP_RANK",
    "AT_THE_DOOR_RECHECK_SECONDS",
    "BACKUP_GRACE_SECONDS",
    "CLASS_COUNT",
    "EARLY_POLL_MIN_SECONDS",
    "EARLY_POLL_SHARE",
    "ESTIMATE_MIN_SPREAD_SECONDS",
    "ESTIMATE_SPREAD",
    "FALLBACK_RATE",
    "FINISHING_SOON_SECONDS",
    "HEAD_MIN_CHECK_SECONDS",
    "IDLE_SLOT_GRACE_SECONDS",
    "JITTER_HIGH",
    "JITTER_LOW",
    "MARK_SCAN_SLACK",
    "MAX_CHECK_SECONDS",
    "MAX_REQUEST_RETRY_SECONDS",
    "MIN_CHECK_SECONDS",
    "NEWCOMER_CHECK_SECONDS",
    "NEXT_SLOT_SLACK_SECONDS",
    "NO_SHOW_MARGIN_SECONDS",
    "PAUSE_RETENTION_SECONDS",
    "PREEMPT_MIN_HOLD_SECONDS",
    "ROUND_HISTORY_SECONDS",
    "SCHEDULED_WAITERS",
    "SHUTDOWN_RETRY_SECONDS",
    "SIZE_DOUBLINGS_FOR_FULL_DELAY",
    "SIZE_UNIT",
    "TAIL_ONLY_HOLD_SECONDS",
    "TICKET_REUSE_SECONDS",
    "UNKNOWN_RATE_CHECK_SECONDS",
    "UNKNOWN_RATE_SPREAD",
]

CLASS_COUNT: Final = 4
AGING_CAP_RANK: Final = 1  # aging lifts a waiter up to ``release``, never into ``interactive``

PAUSE_RETENTION_SECONDS: Final = 600.0  # R-SESS-9
TAIL_ONLY_HOLD_SECONDS: Final = 5.0  # R-SESS-10
FINISHING_SOON_SECONDS: Final = 5.0  # R-SESS-12
PREEMPT_MIN_HOLD_SECONDS: Final = 60.0  # R-PREEMPT-1
NEWCOMER_CHECK_SECONDS: Final = 2.0  # R-EST-3
MIN_CHECK_SECONDS: Final = 2.0
HEAD_MIN_CHECK_SECONDS: Final = 1.0
MAX_CHECK_SECONDS: Final = 300.0
NO_SHOW_MARGIN_SECONDS: Final = 30.0  # R-SESS-7: how late a client may come back
# Issue #26: a poll is early when it comes more than this before its checkAt, or more
# than EARLY_POLL_SHARE of the delay it was given, whichever is more (ADR 0029).
EARLY_POLL_MIN_SECONDS: Final = 0.25
EARLY_POLL_SHARE: Final = 0.05
SHUTDOWN_RETRY_SECONDS: Final = 5
ESTIMATE_SPREAD: Final = 0.12  # the announced interval is ±12 % of the wait …
ESTIMATE_MIN_SPREAD_SECONDS: Final = 2.0  # … and never narrower than ±2 s
# Issue #28, ADR 0034: with no link rate configured and none measured yet, estimates
# assume 32 MiB/s (256 Mbit/s, the geometric middle of the links an artifact server
# sits behind) and say how little that is worth: the interval spans the rate divided
# and multiplied by UNKNOWN_RATE_SPREAD (4 to 256 MiB/s), and a waiter asks again
# within UNKNOWN_RATE_CHECK_SECONDS, by when the first busy seconds have been read.
FALLBACK_RATE: Final = 32 * 1024 * 1024
UNKNOWN_RATE_SPREAD: Final = 8.0
UNKNOWN_RATE_CHECK_SECONDS: Final = 4.0
# Issue #28: how many waiters, first in service order, have their start computed from
# their own sizes (queue_schedule) each time the finish table is; the rest are
# estimated a mean waiting download per round.
SCHEDULED_WAITERS: Final = 1024
# Issue #28: a slot left free this long after the last release while someone waits, and
# none of the marked waiters came for, is taken by the first eligible waiter of the next
# round that comes; longer than a marked waiter's poll period (1 s, plus jitter) and the
# back-ups' grace.
IDLE_SLOT_GRACE_SECONDS: Final = 2.0
# R-HOLD-2: a client with a download id held at the door asks again at least this often;
# a shared store answers it from the process's snapshot (read at most every half second)
# until the snapshot names it marked while a slot is free.
AT_THE_DOOR_RECHECK_SECONDS: Final = 0.25
MARK_SCAN_SLACK: Final = 4096  # waiters a marking may pass over beyond four per mark
TICKET_REUSE_SECONDS: Final = 60.0  # an active session's ticket is re-signed once a minute
# How long the round-robin rounds' history is kept (R-SESS-9, R-TICKET-1): longer than a
# ticket is accepted (15 minutes). Migration 0007 forgets its rows after the same time.
ROUND_HISTORY_SECONDS: Final = 20 * 60.0
JITTER_LOW: Final = 0.9  # per-download factor on the check delay: [0.9, 1.1)
JITTER_HIGH: Final = 1.1
BACKUP_GRACE_SECONDS: Final = 1.5  # one poll period of the first marked waiters, plus jitter
# On a shared store, a marked waiter not yet back keeps a free slot only if the next one
# frees at least this long after it is back (policy.keeps_its_turn's ``slack``, ADR
# 0043): taking that next one costs it a tenth of the least error bound (2 s), and the
# slot kept for it would idle meanwhile. 0.3 s broke the order in the simulation.
NEXT_SLOT_SLACK_SECONDS: Final = 0.2
MAX_REQUEST_RETRY_SECONDS: Final = 60  # per-request Retry-After cap
# Smallest-first with aging: an object of SIZE_UNIT or less is not delayed; each doubling
# above it delays by a tenth of the aging time, up to the whole aging time.
SIZE_UNIT: Final = 16 * 1024 * 1024
SIZE_DOUBLINGS_FOR_FULL_DELAY: Final = 10.0
