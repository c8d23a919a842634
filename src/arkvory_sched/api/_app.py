"""The operator HTTP API: settings, their history, the queue state (R-SET-5, R-VIS-2).

An ASGI app the host mounts beside the download middleware, at :data:`API_PREFIX`::

    Mount(API_PREFIX, app=operator_api(store=..., scheduler=..., authorize=...))

Routes, relative to the mount:

* ``GET /settings`` — the record, laid over the environment (:mod:`._settings_view`).
* ``PUT /settings`` — replace the record; a compare-and-set on ``expectedRevision`` in
  the body or ``If-Match``. ``{}`` (plus the revision) returns to the environment.
* ``GET /settings/history?limit=&before=`` — the audit trail, newest first.
* ``GET /state`` — the queue per class, the forecast, the active sessions, and each
  class's open windows today and tomorrow (:mod:`._windows_view`).
* ``GET /state/history`` — the last hour of queue length and wait per class, from the
  host's :class:`QueueHistory` (:mod:`._history`).

Service-account classes are part of the record (``serviceAccountClasses``, ADR 0022),
changed by ``PUT /settings`` like any other field: one revision, one compare-and-set,
one audit entry. There is deliberately no sub-resource per service account: two
write paths to one record would need two concurrency stories, and a client changing
one account reads the record, changes one key and puts it back with its revision.

A change is applied in this process before the answer (the keeper is told to refresh),
so the operator who made it sees it in force; the other processes of a fleet read it
within their refresh interval (R-SET-3).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final, Protocol

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, Router
from starlette.types import Receive, Scope, Send

from .._exceptions import (
    RevisionMismatchError,
    SettingsError,
    SettingsUnavailableError,
    StoreUnavailableError,
)
from .._port import DownloadScheduler
from ..settings import SettingsStore, StoredSettings, apply_stored
from ._body import BodyError, read_json_object, whole_number
from ._guard import refuse_read, refuse_write
from ._history import QueueHistory, history_document
from ._identity import Authorize, identify
from ._problems import json_pointer, problem
from ._settings_view import audit_document, etag_of, invalid_fields, settings_document
from ._state_view import state_document
from ._windows_view import windows_document

__all__ = [
    "API_PREFIX",
    "DEFAULT_CHALLENGE",
    "DEFAULT_HISTORY_LIMIT",
    "MAX_HISTORY_LIMIT",
    "OperatorApi",
    "SettingsApplier",
    "operator_api",
]

API_PREFIX: Final = "/api/v1/system/downloads"
DEFAULT_CHALLENGE: Final = 'Bearer realm="arkvory-sched"'
DEFAULT_HISTORY_LIMIT: Final = 50
MAX_HISTORY_LIMIT: Final = 500
_STORE_RETRY_SECONDS: Final = 10
_ETAG = re.compile(r'^\s*"rev-(\d{1,18})"\s*$')
_REVISION_MEMBER: Final = "expectedRevision"
# Every route takes every method and answers 405 itself, as a problem document.
_METHODS: Final = ["GET", "HEAD", "PUT", "POST", "PATCH", "DELETE", "OPTIONS"]


class SettingsApplier(Protocol):
    """What the API needs of the process's settings keeper (``SettingsKeeper``).

    ``refresh`` applies the newest record now; ``revision`` is the one in force;
    ``problems`` and ``error`` explain what is not (R-SET-4, R-SET-6).
    """

    @property
    def revision(self) -> int: ...
    @property
    def problems(self) -> Sequence[str]: ...
    @property
    def error(self) -> str | None: ...
    async def refresh(self) -> bool: ...


def operator_api(
    *,
    store: SettingsStore,
    scheduler: DownloadScheduler,
    authorize: Authorize,
    keeper: SettingsApplier | None = None,
    challenge: str = DEFAULT_CHALLENGE,
    history: QueueHistory | None = None,
) -> OperatorApi:
    """The API for one process; every argument is keyword-only and ``authorize`` has no
    default (see :class:`OperatorApi`)."""
    return OperatorApi(
        store=store,
        scheduler=scheduler,
        authorize=authorize,
        keeper=keeper,
        challenge=challenge,
        history=history,
    )


class OperatorApi:
    """The operator API as an ASGI app.

    ``authorize`` is the host's ``request -> Identity | None`` (sync or async): there is
    no open default, because an API that changes how the link is shared must not be
    reachable by anyone a host forgot to check. ``keeper`` is the process's settings
    keeper; without one (a host that applies settings itself) a change is configured
    on ``scheduler`` directly. ``challenge`` is the ``WWW-Authenticate`` of a ``401``.
    ``history`` is the process's :class:`QueueHistory` (its task runs in the host's
    lifespan); without one, ``/state/history`` answers that nothing is recorded.
    """

    def __init__(
        self,
        *,
        store: SettingsStore,
        scheduler: DownloadScheduler,
        authorize: Authorize,
        keeper: SettingsApplier | None = None,
        challenge: str = DEFAULT_CHALLENGE,
        history: QueueHistory | None = None,
    ) -> None:
        if not callable(authorize):
            raise TypeError("authorize must be a callable: request -> Identity | None")
        self._store = store
        self._scheduler = scheduler
        self._authorize = authorize
        self._keeper = keeper
        self._challenge = challenge
        self._queue_history = history
        self._applied_revision: int | None = None
        self._router = Router(
            routes=[
                Route("/settings", self._settings, methods=_METHODS),
                Route("/settings/history", self._history, methods=_METHODS),
                Route("/state", self._state, methods=_METHODS),
                Route("/state/history", self._state_history, methods=_METHODS),
            ],
            default=self._not_found,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._router(scope, receive, send)

    # ------------------------------------------------------------------ routes
    async def _settings(self, request: Request) -> Response:
        if request.method in ("GET", "HEAD"):
            return await self._read_settings(request)
        if request.method == "PUT":
            return await self._write_settings(request)
        return _not_allowed("GET, HEAD, PUT")

    async def _read_settings(self, request: Request) -> Response:
        refused = refuse_read(await identify(self._authorize, request), self._challenge)
        if refused is not None:
            return refused
        try:
            stored = await self._store.read()
        except SettingsUnavailableError as error:
            return _unavailable(error)
        return self._answer(stored)

    async def _write_settings(self, request: Request) -> Response:
        identity = await identify(self._authorize, request)
        refused = refuse_write(request, identity, self._challenge)
        if refused is not None:
            return refused
        assert identity is not None
        try:
            body = await read_json_object(request)
        except BodyError as error:
            title = "Body too large" if error.status == 413 else "Malformed JSON"
            if error.position is None:
                return problem(error.status, error.reason, title, error.detail)
            return problem(
                error.status, error.reason, title, error.detail, position=dict(error.position)
            )
        expected = _expected_revision(request, body)
        if isinstance(expected, Response):
            return expected
        revision, by_if_match = expected
        fields = {name: value for name, value in body.items() if name != _REVISION_MEMBER}
        try:
            stored = await self._store.compare_and_set(
                fields, expected_revision=revision, updated_by=identity.name
            )
        except SettingsError as error:
            # The store names the first bad field (and audits the attempt); the answer
            # names every one, so the operator fixes them in one go.
            return _invalid(invalid_fields(self._store.environment, fields) or [error])
        except RevisionMismatchError as error:
            return _mismatch(error, by_if_match)
        except SettingsUnavailableError as error:
            return _unavailable(error)
        await self._apply(stored)
        return self._answer(stored)

    async def _history(self, request: Request) -> Response:
        if request.method not in ("GET", "HEAD"):
            return _not_allowed("GET, HEAD")
        refused = refuse_read(await identify(self._authorize, request), self._challenge)
        if refused is not None:
            return refused
        limit = _query_int(request, "limit", DEFAULT_HISTORY_LIMIT, 1, MAX_HISTORY_LIMIT)
        before = _query_int(request, "before", None, 1, None)
        if isinstance(limit, Response):
            return limit
        if isinstance(before, Response):
            return before
        assert limit is not None
        try:
            entries = await self._store.history(limit=limit + 1, before=before)
        except SettingsUnavailableError as error:
            return _unavailable(error)
        page = entries[:limit]
        following: str | None = None
        if len(entries) > limit and page:
            following = str(request.url.include_query_params(limit=limit, before=page[-1].id))
        response = JSONResponse(
            {"entries": [audit_document(entry) for entry in page], "next": following}
        )
        response.headers["cache-control"] = "no-store"
        if following is not None:
            response.headers["link"] = f'<{following}>; rel="next"'
        return response

    async def _state(self, request: Request) -> Response:
        if request.method not in ("GET", "HEAD"):
            return _not_allowed("GET, HEAD")
        identity = await identify(self._authorize, request)
        refused = refuse_read(identity, self._challenge)
        if refused is not None:
            return refused
        assert identity is not None
        try:
            state = await self._scheduler.queue_state()
        except StoreUnavailableError as error:
            return _unavailable(error)
        settings = self._scheduler.settings
        document = state_document(state, settings, with_sessions=identity.may_write)
        document["windows"] = windows_document(settings, state.at)
        response = JSONResponse(document)
        response.headers["cache-control"] = "no-store"
        return response

    async def _state_history(self, request: Request) -> Response:
        if request.method not in ("GET", "HEAD"):
            return _not_allowed("GET, HEAD")
        refused = refuse_read(await identify(self._authorize, request), self._challenge)
        if refused is not None:
            return refused
        response = JSONResponse(history_document(self._queue_history))
        response.headers["cache-control"] = "no-store"
        return response

    async def _not_found(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = problem(
            404,
            "not_found",
            "Not found",
            "The operator API has /settings, /settings/history, /state and /state/history.",
        )
        await response(scope, receive, send)

    # ------------------------------------------------------------------ helpers
    async def _apply(self, stored: StoredSettings) -> None:
        """Put the new record in force here before answering (R-SET-3)."""
        if self._keeper is not None:
            await self._keeper.refresh()
            return
        settings, _ = apply_stored(self._store.environment, stored.fields)
        await self._scheduler.configure(settings)
        self._applied_revision = stored.revision

    def _answer(self, stored: StoredSettings) -> Response:
        keeper = self._keeper
        running: list[str] = []
        applied = self._applied_revision
        if keeper is not None:
            applied = keeper.revision
            running = list(keeper.problems)
            if keeper.error is not None:
                running.append(
                    f"The last attempt to apply the stored settings failed ({keeper.error}); "
                    "the process runs on the settings it applied before and tries again."
                )
        document = settings_document(
            stored, self._store.environment, applied_revision=applied, running_problems=running
        )
        response = JSONResponse(document)
        response.headers["etag"] = etag_of(stored.revision)
        response.headers["cache-control"] = "no-store"
        return response


def _expected_revision(request: Request, body: dict[str, object]) -> tuple[int, bool] | Response:
    """The revision the change expects, and whether it came from ``If-Match``."""
    in_body = body.get(_REVISION_MEMBER)
    header = request.headers.get("if-match")
    from_header: int | None = None
    if header is not None:
        match = _ETAG.match(header)
        if match is None:
            return problem(
                400,
                "invalid_precondition",
                "Invalid If-Match",
                'If-Match must be one ETag of this resource, such as "rev-3" (not * or a list).',
                invalidParams=[{"name": "If-Match", "reason": "not a revision ETag"}],
            )
        from_header = int(match.group(1))
    if _REVISION_MEMBER in body and (
        isinstance(in_body, bool) or not isinstance(in_body, int) or in_body < 0
    ):
        return _invalid([SettingsError(_REVISION_MEMBER, "must be a whole number >= 0")])
    if from_header is None and in_body is None:
        return problem(
            428,
            "precondition_required",
            "Revision required",
            "A change must say which revision it replaces: send expectedRevision in the "
            "body or the ETag of your last read in If-Match.",
        )
    if from_header is not None and in_body is not None and from_header != in_body:
        return _invalid(
            [SettingsError(_REVISION_MEMBER, f"disagrees with If-Match (revision {from_header})")]
        )
    if from_header is not None:
        return from_header, True
    assert isinstance(in_body, int)
    return in_body, False


def _query_int(
    request: Request, name: str, default: int | None, low: int, high: int | None
) -> int | Response | None:
    text = request.query_params.get(name)
    if text is None or text == "":
        return default
    value = int(text) if whole_number(text) and len(text) <= 18 else None
    if value is None or value < low or (high is not None and value > high):
        bound = f"from {low} to {high}" if high is not None else f"at least {low}"
        return problem(
            400,
            "invalid_query",
            "Invalid query parameter",
            f"{name} must be a whole number {bound}.",
            invalidParams=[{"name": name, "reason": f"must be a whole number {bound}"}],
        )
    return value


def _invalid(errors: Sequence[SettingsError]) -> Response:
    params = [{"name": json_pointer(error.field), "reason": error.message} for error in errors]
    reasons = "; ".join(f"{param['name']}: {param['reason']}" for param in params)
    return problem(
        400,
        "invalid_settings",
        "Invalid settings",
        f"Nothing was saved. {reasons}",
        invalidParams=params,
    )


def _mismatch(error: RevisionMismatchError, by_if_match: bool) -> Response:
    # If-Match is HTTP's own precondition, which fails with 412 (RFC 9110 §13.1.1);
    # expectedRevision in the body is this API's, which fails with 409 (R-SET-5).
    status = 412 if by_if_match else 409
    by = f" by {error.updated_by}" if error.updated_by else ""
    return problem(
        status,
        "revision_mismatch",
        "The settings changed meanwhile",
        f"The settings are at revision {error.current} (changed{by}), not {error.expected}; "
        "nothing was saved. Read them again and reapply your change.",
        headers={"etag": etag_of(error.current)},
        expectedRevision=error.expected,
        currentRevision=error.current,
        updatedBy=error.updated_by,
    )


def _unavailable(error: StoreUnavailableError | SettingsUnavailableError) -> Response:
    return problem(
        503,
        "storage_unavailable",
        "Storage unavailable",
        f"The settings or the queue cannot be read now ({error}); nothing was changed.",
        headers={"retry-after": str(_STORE_RETRY_SECONDS)},
    )


def _not_allowed(allow: str) -> Response:
    return problem(
        405,
        "method_not_allowed",
        "Method not allowed",
        f"This resource answers {allow}.",
        headers={"allow": allow},
    )
