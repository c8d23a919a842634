"""The in-memory store: the embedded default implementation of the port.

One process keeps every session, slot and queue position in plain Python structures
and applies the shared policy (:mod:`arkvory_sched.policy`) to them directly. It is a
package of its own because it is one of two stores behind the same port: the
PostgreSQL store (:mod:`arkvory_sched.postgres`) must never depend on it, and nothing
outside imports its internals.

The store is a small facade over parts with one job each. Each part is handed, in its
constructor, the other parts and the shared records it uses; none reads another's
private attributes, and only the session table's transitions move a session between
states. Imports point down this list (a part imports only parts below it):

- :mod:`._memory`: :class:`InMemoryDownloadScheduler`, the async shell: waits for a
  per-request place, wakes held requests; its request paths call the parts directly.
- :mod:`._core`: :class:`SchedulerCore`, the synchronous facade that builds the parts,
  hands each call to its part and the new settings to every part (``configure``).
- :mod:`._admission`: ``admit`` and its fast path ``admit_now``: a new session, a
  further range, a returning waiter, a resumption, or a per-request place; how a
  request is admitted is the policy's plan (``policy.plan_request``).
- :mod:`._delivery`: ``report`` and ``progress``: bytes, delivered ranges, completion.
- :mod:`._tick`: expiry, idle release, aging, preemption and marking.
- :mod:`._statistics`, :mod:`._queue_state`, :mod:`._own_downloads`: the readers
  (``stats()``, ``queue_state()``, ``downloads_of()``); they change nothing.
- :mod:`._answers`: what a waiting or refused client is told: the delivery rate, start
  estimates, ``Queued`` and its early repeats (ADR 0029), tickets, refusals.
- :mod:`._slots`: whether a slot is free for a session (shares, reserve, windows).
- :mod:`._table`: the session table: sessions, principals, the active map, the fair
  queue, the deadlines and the counts that follow them, with the transitions between
  session states (enqueue, activate, pause, requeue, complete, forget).
- :mod:`._counters`: the running totals ``stats()`` reports, one record shared by the
  parts that count.
- :mod:`._session`, :mod:`._fairqueue`, :mod:`._deadlines`, :mod:`._intervals`: the
  records and indexes the table keeps.

The per-request places are the shared ``RequestAdmission`` (``_request_admission.py``),
which the PostgreSQL store uses as well.
"""

from __future__ import annotations

from ._memory import InMemoryDownloadScheduler
from ._session import Session

__all__ = [
    "InMemoryDownloadScheduler",
    "Session",
]
