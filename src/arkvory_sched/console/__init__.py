"""The operator page (R-VIS-2): the queue and the settings in a browser, no build step.

Mount :func:`operator_page` beside the operator API, with the same ``authorize``
callable, where operators find it::

    from starlette.routing import Mount
    from arkvory_sched.api import API_PREFIX, operator_api
    from arkvory_sched.console import operator_page

    routes = [
        Mount(API_PREFIX, app=operator_api(store=..., scheduler=..., authorize=authorize)),
        Mount("/admin/downloads", app=operator_page(authorize=authorize)),
    ]

The page is plain HTML, CSS and JavaScript modules shipped in the wheel; it reads and
writes only through the operator API (ADR 0024). The project's icon ships beside them
(:func:`favicon_app`), for every page a host serves.
"""

from __future__ import annotations

from ._icon import FAVICON_ICO, FAVICON_SVG, favicon, favicon_app
from ._page import CONTENT_SECURITY_POLICY, DEFAULT_POLL_SECONDS, OperatorPage, operator_page

__all__ = [
    "CONTENT_SECURITY_POLICY",
    "DEFAULT_POLL_SECONDS",
    "FAVICON_ICO",
    "FAVICON_SVG",
    "OperatorPage",
    "favicon",
    "favicon_app",
    "operator_page",
]
