"""Quantiles read off a cumulative histogram, the way Prometheus' ``histogram_quantile``
does: find the bucket holding the rank, interpolate linearly inside it.

The stores keep waits and estimate errors as fixed-bucket histograms (bounded memory
whatever the traffic); the operator page wants "p50" and "p95" rather than buckets. A
quantile in the overflow bucket is reported as the largest bound — a floor, which
the page states as "at least".
"""

from __future__ import annotations

from .._model import HistogramSnapshot

__all__ = ["histogram_quantile"]


def histogram_quantile(snapshot: HistogramSnapshot, quantile: float) -> float | None:
    """The ``quantile`` (0..1) of the observations, or ``None`` before any."""
    if not 0.0 <= quantile <= 1.0:
        raise ValueError(f"quantile must be between 0 and 1, not {quantile}")
    if snapshot.count == 0 or not snapshot.bounds:
        return None
    rank = quantile * snapshot.count
    lower_bound = min(0.0, snapshot.bounds[0])
    below = 0
    for bound, cumulative in zip(snapshot.bounds, snapshot.counts, strict=True):
        if cumulative >= rank and cumulative > below:
            inside = cumulative - below
            return lower_bound + (bound - lower_bound) * (rank - below) / inside
        below = cumulative
        lower_bound = bound
    return snapshot.bounds[-1]
