"""What a store measures as it runs: waits, the accuracy of its start estimates, idle slots.

The stores keep these records on their request path, so this package stands low: it
needs only plain values and the policy's estimate interval, and none of what serves
them (``observability`` renders the records for Prometheus and readiness, with
prometheus_client and starlette, which a store never needs to import).

- :mod:`._histogram`: a fixed-bucket cumulative histogram.
- :mod:`._accuracy`: scoring announced start estimates against actual starts, in
  total and per kind of client.
- :mod:`._idle`: slots left free while someone waits, integrated over queue time.
"""

from __future__ import annotations

from ._accuracy import EstimateScorer
from ._histogram import Histogram
from ._idle import IdleRecord

__all__ = ["EstimateScorer", "Histogram", "IdleRecord"]
