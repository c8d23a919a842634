"""The in-memory store: the embedded default implementation of the port.

One process keeps every session, slot and queue position in plain Python structures
and applies the shared policy (:mod:`arkvory_sched.policy`) to them directly. It is a
package of its own because it is one of two stores behind the same port: the
PostgreSQL store (:mod:`arkvory_sched.postgres`) must never depend on it, and nothing
outside imports its internals.

- :mod:`._memory`: :class:`InMemoryDownloadScheduler`, the async shell over the core.
- :mod:`._core` and ``_core_*``: the pure, synchronous core (admission, delivery,
  tick, estimates, transitions) over one shared :mod:`._core_state`.
- :mod:`._session`, :mod:`._fairqueue`, :mod:`._deadlines`, :mod:`._intervals`: the
  records and indexes the core keeps.
"""

from __future__ import annotations

from ._memory import InMemoryDownloadScheduler
from ._session import Session

__all__ = [
    "InMemoryDownloadScheduler",
    "Session",
]
