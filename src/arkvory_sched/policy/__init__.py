"""The scheduling policy, once: pure rules on plain values, used by every store.

Nothing here keeps state, reads a clock or touches storage: time comes in as ``now``,
and a store gathers the values a rule needs — the in-memory store from its live
structures, the PostgreSQL store from a snapshot and a few rows — and applies the
result (ADR 0016). A rule changed here changes for both stores at once.

- :mod:`._constants`: every constant of the design.
- :mod:`._order`: service order between classes (stride) and within one, aging.
- :mod:`._slots`: slot eligibility, the marking budget and marks, preemption.
- :mod:`._estimates`: start estimates, ``checkAt`` and Retry-After values.
- :mod:`._requests`: download ids, session admission, the start of a download.
- :mod:`._windows`: operator windows of a class in wall time of a zone (R-WIN-2).
- :mod:`._forecast`: when the queue empties and why a class is not draining (R-VIS-2).
"""

from __future__ import annotations

from ._constants import (
    AGING_CAP_RANK,
    BACKUP_GRACE_SECONDS,
    CLASS_COUNT,
    ESTIMATE_MIN_SPREAD_SECONDS,
    ESTIMATE_SPREAD,
    FALLBACK_RATE,
    FINISHING_SOON_SECONDS,
    HEAD_MIN_CHECK_SECONDS,
    JITTER_HIGH,
    JITTER_LOW,
    MARK_SCAN_SLACK,
    MAX_CHECK_SECONDS,
    MAX_REQUEST_RETRY_SECONDS,
    MIN_CHECK_SECONDS,
    NEWCOMER_CHECK_SECONDS,
    NO_SHOW_MARGIN_SECONDS,
    PAUSE_RETENTION_SECONDS,
    PREEMPT_MIN_HOLD_SECONDS,
    ROUND_HISTORY_SECONDS,
    SHUTDOWN_RETRY_SECONDS,
    SIZE_DOUBLINGS_FOR_FULL_DELAY,
    SIZE_UNIT,
    TAIL_ONLY_HOLD_SECONDS,
    TICKET_REUSE_SECONDS,
)
from ._estimates import (
    busy_retry_after,
    check_delay,
    estimate_interval,
    estimate_rate,
    estimate_start,
    finish_table,
    jitter,
    no_show_at,
    request_retry_after,
)
from ._forecast import (
    FORECAST_HORIZON_SECONDS,
    ClassWork,
    Forecast,
    Stall,
    StallReason,
    forecast_empty,
    stall_reason,
)
from ._order import (
    caught_up,
    promote_at,
    service_order,
    smallest_first_key,
    stride_ahead,
    strides_of,
)
from ._requests import sets_start, uses_sessions, validated_download_id
from ._slots import (
    MarkBudget,
    YieldCandidate,
    YieldHead,
    YieldHolder,
    backup_may_take_slot,
    choose_marks,
    choose_victim,
    finishing_soon,
    marking_budget,
    over_share_with_contenders,
    slot_free_for,
)
from ._windows import (
    WEEKDAYS,
    ClassWindow,
    is_open,
    next_closing,
    next_opening,
    open_intervals,
    parse_windows,
)

__all__ = [
    "AGING_CAP_RANK",
    "BACKUP_GRACE_SECONDS",
    "CLASS_COUNT",
    "ESTIMATE_MIN_SPREAD_SECONDS",
    "ESTIMATE_SPREAD",
    "FALLBACK_RATE",
    "FINISHING_SOON_SECONDS",
    "FORECAST_HORIZON_SECONDS",
    "HEAD_MIN_CHECK_SECONDS",
    "JITTER_HIGH",
    "JITTER_LOW",
    "MARK_SCAN_SLACK",
    "MAX_CHECK_SECONDS",
    "MAX_REQUEST_RETRY_SECONDS",
    "MIN_CHECK_SECONDS",
    "NEWCOMER_CHECK_SECONDS",
    "NO_SHOW_MARGIN_SECONDS",
    "PAUSE_RETENTION_SECONDS",
    "PREEMPT_MIN_HOLD_SECONDS",
    "ROUND_HISTORY_SECONDS",
    "SHUTDOWN_RETRY_SECONDS",
    "SIZE_DOUBLINGS_FOR_FULL_DELAY",
    "SIZE_UNIT",
    "TAIL_ONLY_HOLD_SECONDS",
    "TICKET_REUSE_SECONDS",
    "WEEKDAYS",
    "ClassWindow",
    "ClassWork",
    "Forecast",
    "MarkBudget",
    "Stall",
    "StallReason",
    "YieldCandidate",
    "YieldHead",
    "YieldHolder",
    "backup_may_take_slot",
    "busy_retry_after",
    "caught_up",
    "check_delay",
    "choose_marks",
    "choose_victim",
    "estimate_interval",
    "estimate_rate",
    "estimate_start",
    "finish_table",
    "finishing_soon",
    "forecast_empty",
    "is_open",
    "jitter",
    "marking_budget",
    "next_closing",
    "next_opening",
    "no_show_at",
    "open_intervals",
    "over_share_with_contenders",
    "parse_windows",
    "promote_at",
    "request_retry_after",
    "service_order",
    "sets_start",
    "slot_free_for",
    "smallest_first_key",
    "stall_reason",
    "stride_ahead",
    "strides_of",
    "uses_sessions",
    "validated_download_id",
]
