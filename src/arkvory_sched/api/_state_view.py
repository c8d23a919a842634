"""The queue state as JSON (R-VIS-2): per class, the forecast, accuracy, idle slots, sessions.

Built from one :class:`QueueState` snapshot and the settings in force; the forecast
and the reasons are the policy's pure functions (:mod:`arkvory_sched.policy`), so this
module only arranges values. Wall times are RFC 3339 strings, durations seconds.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from .._classes import DownloadClass
from .._model import EstimateAccuracy
from .._queue_state import ActiveSession, QueueState
from ..observability import histogram_quantile
from ..policy import ClassWork, forecast_empty, stall_reason
from ..settings import SchedulerSettings

__all__ = ["state_document"]


def state_document(
    state: QueueState, settings: SchedulerSettings, *, with_sessions: bool
) -> dict[str, object]:
    """The document; ``with_sessions`` adds the active sessions (operators only)."""
    stats = state.stats
    now = state.at
    classes = list(DownloadClass)
    schedules = [settings.schedule_of(cls) for cls in classes]
    forecast = forecast_empty(
        [
            ClassWork(
                active_bytes=state.per_class[cls].remaining_bytes,
                waiting_bytes=state.per_class[cls].waiting_bytes,
            )
            for cls in classes
        ],
        schedules,
        rate=stats.delivery_rate,
        now=now,
    )
    active_total = stats.active
    active_interactive = stats.per_class[DownloadClass.INTERACTIVE].active
    per_class: dict[str, object] = {}
    for cls, schedule in zip(classes, schedules, strict=True):
        counts = stats.per_class[cls]
        work = state.per_class[cls]
        stall = stall_reason(
            rank=cls.rank,
            waiting=counts.waiting,
            active=counts.active,
            active_total=active_total,
            active_interactive=active_interactive,
            sessions=settings.sessions,
            reserve=settings.reserve,
            schedule=schedule,
            head_at_share=work.head_at_share,
            now=now,
        )
        empties = forecast.class_empties_at[cls.rank]
        per_class[cls.value] = {
            "waiting": counts.waiting,
            "active": counts.active,
            "paused": counts.paused,
            # No waiter, no oldest wait: null, as in readiness, never a wait of 0 s.
            "oldestWaitSeconds": round(counts.oldest_wait_seconds, 3) if counts.waiting else None,
            "waitP50Seconds": _rounded(histogram_quantile(counts.wait_seconds, 0.5)),
            "waitP95Seconds": _rounded(histogram_quantile(counts.wait_seconds, 0.95)),
            "waitingBytes": work.waiting_bytes,
            "remainingBytes": work.remaining_bytes,
            "emptiesAt": None if empties is None else rfc3339(empties),
            "notDraining": None
            if stall is None
            else {
                "reason": stall.reason.value,
                "nextOpening": None if stall.next_opening is None else rfc3339(stall.next_opening),
            },
        }
    accuracy = stats.estimate_accuracy
    idle = stats.idle_slots
    document: dict[str, object] = {
        "at": rfc3339(now),
        "strategy": stats.strategy,
        "admission": stats.admission,
        "sessions": stats.sessions_limit,
        "slotSizing": None
        if stats.slot_sizing is None
        else {
            "minimum": stats.slot_sizing.minimum,
            "maximum": stats.slot_sizing.maximum,
            "reason": stats.slot_sizing.reason,
        },
        "active": active_total,
        "waiting": stats.waiting,
        "paused": stats.paused,
        "deliveryRate": round(stats.delivery_rate, 1),
        "classes": per_class,
        "forecast": {
            "emptiesAt": None if forecast.empties_at is None else rfc3339(forecast.empties_at),
            "emptiesInSeconds": None
            if forecast.empties_at is None
            else round(max(0.0, forecast.empties_at - now), 1),
        },
        "estimateAccuracy": _accuracy(accuracy)
        | {
            "byClient": {
                kind.value: _accuracy(part)
                for kind, part in sorted(stats.estimate_accuracy_by_client.items())
            }
        },
        "idleSlots": {
            "slots": idle.slots,
            "slotSeconds": round(idle.slot_seconds, 3),
            "stretchSeconds": round(idle.stretch_seconds, 3),
            "longestStretchSeconds": round(idle.longest_stretch_seconds, 3),
        },
    }
    if with_sessions:
        document["activeSessions"] = _sessions(state.active_sessions)
    return document


def _accuracy(accuracy: EstimateAccuracy) -> dict[str, object]:
    """How true the announced starts of some waits were, as the page shows it."""
    return {
        "scored": accuracy.scored,
        "relativeErrorP50": _rounded(histogram_quantile(accuracy.relative_error, 0.5)),
        "relativeErrorP95": _rounded(histogram_quantile(accuracy.relative_error, 0.95)),
        "shareInsideInterval": _rounded(accuracy.share_inside),
    }


def _sessions(sessions: Iterable[ActiveSession]) -> list[dict[str, object]]:
    return [
        {
            "principal": session.principal,
            "class": session.download_class.value,
            "since": rfc3339(session.since),
            "bytesDelivered": session.bytes_delivered,
            "bytesRemaining": session.bytes_remaining,
            "rate": round(session.rate, 1),
        }
        for session in sessions
    ]


def rfc3339(epoch_seconds: float) -> str:
    """Wall-clock seconds as RFC 3339 UTC, whole seconds (as the queue headers give them)."""
    return datetime.fromtimestamp(round(epoch_seconds), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
