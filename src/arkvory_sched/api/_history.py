"""The last hour of the queue, per class, kept in memory for the operator page (R-VIS-2).

The queue state is a snapshot; an operator deciding whether to widen a window or
change a weight needs to see where the queue is going. Storing a time series in the
queue's database would cost every process writes for a picture that is only useful
while someone looks, so each process keeps its own: a ring buffer of
:data:`HISTORY_SAMPLES` samples taken every :data:`HISTORY_SAMPLE_SECONDS` (one hour),
fed by :meth:`QueueHistory.run`, a small task the host starts in its lifespan beside
the tick loop. A sample is the queue length (waiting sessions), the active sessions
and the wait of the oldest waiter of each class, read from
:meth:`DownloadScheduler.stats` (counters, O(classes)); appending it is O(1) and the
buffer never grows past its capacity.

The figures are the same the queue state reports: on a PostgreSQL fleet they are the
fleet's queue as this process sees it, so every process draws the same curve. A
restart starts the history anew.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

import anyio
from anyio.abc import TaskStatus

from .._classes import DownloadClass
from .._clock import Clock, SystemClock
from .._exceptions import StoreUnavailableError
from .._port import DownloadScheduler

__all__ = ["HISTORY_SAMPLES", "HISTORY_SAMPLE_SECONDS", "ClassSample", "QueueHistory", "Sample"]

HISTORY_SAMPLE_SECONDS: Final = 10.0
HISTORY_SAMPLES: Final = 360
_MAX_POINTS: Final = 100_000

log = logging.getLogger("arkvory_sched.api")


@dataclass(frozen=True, slots=True)
class ClassSample:
    """One class at one sample: sessions waiting and active, the oldest waiter's wait."""

    waiting: int
    active: int
    oldest_wait_seconds: float


@dataclass(frozen=True, slots=True)
class Sample:
    """The queue at ``at`` (wall-clock epoch seconds), by class, most urgent first."""

    at: float
    classes: tuple[ClassSample, ...]


class QueueHistory:
    """A bounded history of the queue of ``scheduler``: the newest ``points`` samples,
    one every ``interval`` seconds while :meth:`run` runs.

    ``clock`` gives the wall time of each sample and ``sleep`` waits between them, both
    injected so tests need no real time.
    """

    def __init__(
        self,
        scheduler: DownloadScheduler,
        *,
        interval: float = HISTORY_SAMPLE_SECONDS,
        points: int = HISTORY_SAMPLES,
        clock: Clock | None = None,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    ) -> None:
        if not (interval > 0 and math.isfinite(interval)):
            raise ValueError(f"interval must be a positive number of seconds, not {interval!r}")
        if isinstance(points, bool) or not 1 <= points <= _MAX_POINTS:
            raise ValueError(f"points must be a whole number from 1 to {_MAX_POINTS}")
        self._scheduler = scheduler
        self._clock = clock if clock is not None else SystemClock()
        self._sleep = sleep
        self.interval = interval
        self.capacity = points
        self._samples: deque[Sample] = deque(maxlen=points)

    def samples(self) -> tuple[Sample, ...]:
        """The samples kept, oldest first."""
        return tuple(self._samples)

    async def sample(self) -> Sample | None:
        """Take one sample now and keep it; ``None`` (and nothing kept) when the
        scheduler cannot be read, so a gap shows as a gap, not as an empty queue."""
        try:
            stats = await self._scheduler.stats()
        except StoreUnavailableError as error:
            log.warning("queue history: no sample this time (%s)", error)
            return None
        except Exception:
            # Like the tick loop: a chart is never worth the host's task group.
            log.exception("queue history: reading the queue failed; sampling on")
            return None
        sample = Sample(
            at=self._clock.wall(),
            classes=tuple(
                ClassSample(
                    waiting=stats.per_class[cls].waiting,
                    active=stats.per_class[cls].active,
                    oldest_wait_seconds=stats.per_class[cls].oldest_wait_seconds,
                )
                for cls in DownloadClass
            ),
        )
        self._samples.append(sample)
        return sample

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Sample now and then every ``interval`` seconds until cancelled (the host's
        lifespan owns the task). Ready after the first sample, so the page never
        starts with an empty chart."""
        await self.sample()
        task_status.started()
        while True:
            await self._sleep(self.interval)
            await self.sample()


def history_document(history: QueueHistory | None) -> dict[str, object]:
    """The samples as columns (one list per figure), compact for a page that polls."""
    if history is None:
        return {"recording": False, "intervalSeconds": None, "capacity": 0, "at": [], "classes": {}}
    samples = history.samples()
    classes: dict[str, object] = {}
    for index, cls in enumerate(DownloadClass):
        of_class = [sample.classes[index] for sample in samples]
        classes[cls.value] = {
            "waiting": [point.waiting for point in of_class],
            "active": [point.active for point in of_class],
            "oldestWaitSeconds": [round(point.oldest_wait_seconds, 1) for point in of_class],
        }
    return {
        "recording": True,
        "intervalSeconds": history.interval,
        "capacity": history.capacity,
        "at": [round(sample.at, 3) for sample in samples],
        "classes": classes,
    }
