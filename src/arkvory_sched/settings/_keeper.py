"""The settings keeper: applies the stored operator record to a running scheduler.

The one mechanism by which the settings record reaches a scheduler, whatever the store
and whatever the scheduler (ADR 0022). Every process runs one keeper beside its
scheduler; since every process reads the same record, a change saved through any of
them reaches all of them (R-SET-3):

* at start, before the process serves its first request;
* every ``interval`` seconds (10 by default), so that a change saved by another
  process arrives within one interval;
* at once when told (:meth:`SettingsKeeper.refresh`), which the settings API does after
  a successful change, so the operator's own process runs it before answering.

Only a revision newer than the one running is applied: reading the same revision again
does not call ``configure`` again, and a slow read that returns an older revision than
one applied meanwhile cannot undo it. The record is read softly (R-SET-4, R-SET-6,
:func:`apply_stored`): what does not fit this server is reported in :attr:`problems`
and the environment is used instead.

A store that cannot be reached does not stop the process (R-SET-4): the scheduler runs
on what it has (the environment at first) and the keeper tries again every interval.
"""

from __future__ import annotations

import logging
import math
from datetime import datetime
from typing import Final, Protocol

import anyio
from anyio.abc import TaskStatus

from .._exceptions import SettingsError, SettingsUnavailableError, StoreUnavailableError
from ._store import SettingsStore, apply_stored
from ._values import SchedulerSettings

__all__ = ["DEFAULT_REFRESH_SECONDS", "Configurable", "SettingsKeeper"]

DEFAULT_REFRESH_SECONDS: Final = 10.0  # R-SET-3, R-SET-4

log = logging.getLogger("arkvory_sched.settings")


class Configurable(Protocol):
    """What the keeper needs of a scheduler: its settings, and a way to change them.

    Every ``DownloadScheduler`` is one; naming only these two keeps the settings
    package below the port it configures.
    """

    @property
    def settings(self) -> SchedulerSettings: ...

    async def configure(self, settings: SchedulerSettings) -> None: ...


class SettingsKeeper:
    """Keeps ``scheduler`` on the newest record of ``store``.

    ``revision``, ``updated_by`` and ``updated_at`` describe the record running now
    (0 and ``None``: the environment); ``problems`` explains why parts of it, or all
    of it, are not applied; ``error`` is the last failure to read or apply (``None``
    after a success), for readiness and the settings page.
    """

    def __init__(
        self,
        store: SettingsStore,
        scheduler: Configurable,
        *,
        interval: float = DEFAULT_REFRESH_SECONDS,
    ) -> None:
        if not (interval > 0 and math.isfinite(interval)):
            raise ValueError(f"interval must be a positive number of seconds, not {interval!r}")
        self._store = store
        self._scheduler = scheduler
        self._interval = interval
        self._lock = anyio.Lock()
        self._wake = anyio.Event()
        self.revision = 0
        self.updated_by: str | None = None
        self.updated_at: datetime | None = None
        self.problems: tuple[str, ...] = ()
        self.error: str | None = None

    @property
    def store(self) -> SettingsStore:
        """The store this keeper reads (the settings API writes through it too)."""
        return self._store

    @property
    def settings(self) -> SchedulerSettings:
        """The settings the scheduler runs on."""
        return self._scheduler.settings

    async def refresh(self) -> bool:
        """Read the record now and apply it if newer; whether it was applied.

        Never raises for a store or scheduler failure: it is logged and kept in
        :attr:`error`, the running settings stay, and the next refresh tries again.
        Concurrent calls are serialised, so one revision is applied once.
        """
        async with self._lock:
            try:
                stored = await self._store.read()
                if stored.revision <= self.revision:
                    self.error = None
                    return False
                settings, problems = apply_stored(self._store.environment, stored.fields)
                await self._scheduler.configure(settings)
            except (
                SettingsUnavailableError,
                StoreUnavailableError,
                SettingsError,
                OSError,
            ) as error:
                self._failed(error)
                return False
            except Exception as error:  # a driver error a store failed to translate
                log.exception("settings: refresh failed")
                self._failed(error)
                return False
            self.revision = stored.revision
            self.updated_by = stored.updated_by
            self.updated_at = stored.updated_at
            self.problems = tuple(problems)
            self.error = None
            for problem in problems:
                log.warning("stored settings revision %d: %s", stored.revision, problem)
            log.info(
                "applied stored settings revision %d (by %s)", stored.revision, stored.updated_by
            )
            return True

    def wake(self) -> None:
        """Make :meth:`run` refresh now rather than at the end of its interval.

        For callers that cannot await (a signal handler, a sync callback); the settings
        API awaits :meth:`refresh` instead, so its answer follows the applied record.
        """
        self._wake.set()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Refresh now, report started, then refresh every interval until cancelled.

        ``await task_group.start(keeper.run)`` returns after the first refresh, whether
        it succeeded or not, so a process applies the stored record before serving and
        still starts while the store is unreachable.
        """
        await self.refresh()
        task_status.started()
        while True:
            with anyio.move_on_after(self._interval):
                await self._wake.wait()
            self._wake = anyio.Event()
            await self.refresh()

    def _failed(self, error: BaseException) -> None:
        text = " ".join(str(error).split()) or type(error).__name__
        if self.error != text:  # once per distinct failure, not every 10 s
            log.warning(
                "settings: cannot apply the stored record (%s); running on revision %d, "
                "trying again in %g s",
                text,
                self.revision,
                self._interval,
            )
        self.error = text
