"""The ASGI adapter: the thin layer between an artifact server and the scheduler port.

It parses a request, asks a :class:`~arkvory_sched.DownloadScheduler` (any store), writes
the answer's headers and observes the response; no scheduling policy lives here. It is
a package of its own so that the HTTP side (headers, ranges, problem documents,
conditional requests) stays apart from the stores, which know nothing of HTTP.

- :mod:`._middleware`: :class:`DownloadSchedulerMiddleware`.
- :mod:`._request_headers`, :mod:`._ranges`, :mod:`._conditional`: what a request asks.
- :mod:`._problems`: ``429``/``503`` answers as RFC 9457 problem documents.
- :mod:`._browser`, :mod:`._waiting_page`: a browser's navigation to a download that
  waits, its place cookie, and the page it gets instead of the problem document
  (``waiting-page.html``, ``.css``, ``.js``; ADR 0035).
- :mod:`._observer`: following a granted response to its end and reporting it.
- :mod:`._asgi`: the ASGI type aliases.

The ``Range`` and conditional-request helpers are public to the other packages because
the demo file server must decide exactly as the middleware predicts.
"""

from __future__ import annotations

from ._conditional import etag_listed, http_date
from ._middleware import DownloadSchedulerMiddleware
from ._ranges import (
    Satisfiable,
    Unsatisfiable,
    WholeObject,
    coalesce,
    content_range,
    parse_range,
)

__all__ = [
    "DownloadSchedulerMiddleware",
    "Satisfiable",
    "Unsatisfiable",
    "WholeObject",
    "coalesce",
    "content_range",
    "etag_listed",
    "http_date",
    "parse_range",
]
