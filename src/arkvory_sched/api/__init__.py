"""The operator HTTP API (R-SET-5, R-VIS-2): settings, their audit trail, queue state.

Mount :func:`operator_api` at :data:`API_PREFIX` beside the download middleware; give
it the settings store, the scheduler, the process's settings keeper, its
:class:`QueueHistory` and an ``authorize`` callable that says who a request is
(:class:`Identity`). :func:`identify` and :func:`refuse_read` let a page served
beside the API (``arkvory_sched.console``) admit exactly whom the API admits. See
``docs/api.md`` for the endpoints, the problem documents and the rules for writes.
"""

from __future__ import annotations

from ._app import (
    API_PREFIX,
    DEFAULT_CHALLENGE,
    DEFAULT_HISTORY_LIMIT,
    MAX_HISTORY_LIMIT,
    OperatorApi,
    SettingsApplier,
    operator_api,
)
from ._body import MAX_BODY_BYTES
from ._guard import REQUEST_HEADER, refuse_read
from ._history import HISTORY_SAMPLE_SECONDS, HISTORY_SAMPLES, QueueHistory
from ._identity import OPERATOR, VIEWER, Authorize, Identity, Role, identify
from ._problems import PROBLEM_TYPE_PREFIX, problem

__all__ = [
    "API_PREFIX",
    "DEFAULT_CHALLENGE",
    "DEFAULT_HISTORY_LIMIT",
    "HISTORY_SAMPLES",
    "HISTORY_SAMPLE_SECONDS",
    "MAX_BODY_BYTES",
    "MAX_HISTORY_LIMIT",
    "OPERATOR",
    "PROBLEM_TYPE_PREFIX",
    "REQUEST_HEADER",
    "VIEWER",
    "Authorize",
    "Identity",
    "OperatorApi",
    "QueueHistory",
    "Role",
    "SettingsApplier",
    "identify",
    "operator_api",
    "problem",
    "refuse_read",
]
