"""Metrics and readiness: what operators and load balancers see of a scheduler.

Everything here reads the aggregates of :meth:`DownloadScheduler.stats` (counts per
class, never an id) or records them, for any store. It is a package of its own because
it sits beside the request path, not on it: the stores keep their waits and estimate
errors in :mod:`arkvory_sched.measures`, the endpoints here serve them, and no store
imports this package.

- :mod:`._metrics`: :func:`metrics_app`, Prometheus metrics rendered at scrape time.
- :mod:`._readiness`: :func:`readiness_app`, the readiness document.
- :mod:`._quantiles`: p50/p95 read off such a histogram, for the operator API.
"""

from __future__ import annotations

from ._metrics import metrics_app
from ._quantiles import histogram_quantile
from ._readiness import readiness_app

__all__ = [
    "histogram_quantile",
    "metrics_app",
    "readiness_app",
]
