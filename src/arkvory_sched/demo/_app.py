"""The demo artifact server assembled: files behind the scheduler, plus its endpoints.

Only ``/files`` goes through :class:`DownloadSchedulerMiddleware`: metrics, readiness
and the index page must answer while the download queue is full, so they are routed
beside it, not behind it. Starlette does not forward the ASGI lifespan to mounted
apps, so the application's own lifespan runs the scheduler's tick loop and closes the
scheduler on shutdown (the middleware is told not to).

Operator settings are kept in a settings store and applied by a
:class:`SettingsKeeper` that the lifespan runs (ADR 0022): with the in-memory queue the
store is a SQLite file, by default hidden in the served directory
(``ARKVORY_SETTINGS_FILE`` moves it; the file server never serves hidden files); with
``database_url`` it is the PostgreSQL schema of the shared queue. The settings API
finds both on ``app.state`` (``settings_store``, ``settings_keeper``).

The ticket signing key of the in-memory queue lives in the same SQLite file, so a
client's ``Arkvory-Queue-Ticket`` stays valid across a restart of the demo and it keeps
its place in the queue (R-TICKET-4); the key file of earlier versions is imported once.
"""

from __future__ import annotations

import binascii
import html
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Final
from urllib.parse import quote

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from .._classes import PrincipalKind
from .._exceptions import ConfigurationError
from .._port import DownloadScheduler
from .._ticking import run_tick_loop
from ..api import API_PREFIX, HISTORY_SAMPLE_SECONDS, Identity, QueueHistory, operator_api
from ..asgi import DownloadSchedulerMiddleware
from ..console import FAVICON_ICO, FAVICON_SVG, favicon_app, operator_page
from ..memory import InMemoryDownloadScheduler
from ..observability import metrics_app, readiness_app
from ..portal import own_downloads_app
from ..postgres import DEFAULT_SCHEMA, PostgresScheduler, PostgresSettingsStore
from ..settings import SchedulerSettings, SettingsKeeper, SettingsStore
from ..sqlite import SqliteSettingsStore, load_or_create_ticket_key, settings_file
from ._auth import StaffMap, TokenMap, is_known_token, principal_for, staff_for
from ._bandwidth import BandwidthGovernor
from ._files import FileServer
from ._login import login_routes
from ._resolver import make_resolver

__all__ = [
    "KEY_FILE_NAME",
    "OWN_DOWNLOADS_PATH",
    "TICKET_KEY_VARIABLE",
    "build_app",
    "list_files",
    "load_ticket_key",
]

TICKET_KEY_VARIABLE: Final = "ARKVORY_TICKET_KEY"
KEY_FILE_NAME: Final = ".arkvory-ticket-key"
INDEX_LIMIT: Final = 1000
OWN_DOWNLOADS_PATH: Final = "/downloads/mine"
_MIN_KEY_BYTES: Final = 16


def load_ticket_key(
    root: Path, environ: Mapping[str, str] | None = None, *, settings_path: Path | None = None
) -> bytes:
    """The ticket signing key: ``ARKVORY_TICKET_KEY`` (hex), else the settings file's.

    The settings file (``settings_path``, by default :func:`settings_file` of ``root``)
    creates the key once with 32 random bytes; two servers started at once on one
    file agree on it. The key file of earlier versions, ``root/.arkvory-ticket-key``,
    is imported instead the first time, so clients' tickets stay valid. Raises
    :class:`ConfigurationError` for a malformed variable or key file.
    """
    env = os.environ if environ is None else environ
    text = env.get(TICKET_KEY_VARIABLE, "").strip()
    if text:
        return _decode_key(text, TICKET_KEY_VARIABLE)
    path = settings_path if settings_path is not None else settings_file(root, env)
    return load_or_create_ticket_key(path, legacy_key_file=root / KEY_FILE_NAME)


def _decode_key(text: str, source: str) -> bytes:
    try:
        key = binascii.unhexlify(text)
    except (binascii.Error, ValueError):
        raise ConfigurationError(
            TICKET_KEY_VARIABLE, "ticket_key", f"{source}: expected the key as hexadecimal"
        ) from None
    if len(key) < _MIN_KEY_BYTES:
        raise ConfigurationError(
            TICKET_KEY_VARIABLE,
            "ticket_key",
            f"{source}: the key must be at least {_MIN_KEY_BYTES} bytes "
            f"({2 * _MIN_KEY_BYTES} hex digits)",
        )
    return key


def list_files(root: Path, limit: int = INDEX_LIMIT) -> list[tuple[str, int]]:
    """Up to ``limit`` servable files under ``root`` as ``(relative path, size)``, sorted.

    Hidden files and directories are skipped, as the file server refuses them.
    """
    found: list[tuple[str, int]] = []
    for directory, subdirectories, names in os.walk(root):
        subdirectories[:] = sorted(d for d in subdirectories if not d.startswith("."))
        for name in sorted(names):
            if name.startswith("."):
                continue
            path = Path(directory, name)
            try:
                if not path.is_file():
                    continue
                size = path.stat().st_size
            except OSError:
                continue
            found.append((path.relative_to(root).as_posix(), size))
            if len(found) >= limit:
                return found
    return found


class _Endpoint:
    """Hands a pure ASGI app to a Starlette :class:`Route` unchanged.

    A plain function would be taken for a request/response endpoint; an instance is
    called as an ASGI app, and an exact route (unlike a mount) needs no trailing slash.
    """

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._app(scope, receive, send)


HISTORY_SECONDS_VARIABLE: Final = "ARKVORY_DEMO_HISTORY_SECONDS"
OPERATOR_PAGE_PATH: Final = "/admin/downloads"


def _history_seconds() -> float:
    """The queue history's sampling interval: ``$ARKVORY_DEMO_HISTORY_SECONDS`` or 10 s."""
    text = os.environ.get(HISTORY_SECONDS_VARIABLE, "").strip()
    try:
        seconds = float(text) if text else HISTORY_SAMPLE_SECONDS
    except ValueError:
        raise ConfigurationError(
            HISTORY_SECONDS_VARIABLE, "history_seconds", "expected a number of seconds"
        ) from None
    if not 0.1 <= seconds <= 3600:
        raise ConfigurationError(
            HISTORY_SECONDS_VARIABLE, "history_seconds", "expected 0.1 to 3600 seconds"
        )
    return seconds


def _operator_api(
    scheduler: DownloadScheduler, keeper: SettingsKeeper, staff: StaffMap, history: QueueHistory
) -> Mount:
    """The operator API beside the files, for the demo's staff tokens."""

    def authorize(request: Request) -> Identity | None:
        return staff_for(request, staff)

    api = operator_api(
        store=keeper.store,
        scheduler=scheduler,
        authorize=authorize,
        keeper=keeper,
        history=history,
    )
    return Mount(API_PREFIX, app=api)


def _own_downloads(scheduler: DownloadScheduler, tokens: TokenMap) -> Mount:
    """A person's own downloads page (issue #19) for the demo's download tokens.

    A request without a token is the anonymous link, and a link is nobody's account:
    it gets ``401``, as does an unknown token. People and service accounts see their
    own downloads.
    """

    def identify(request: Request) -> str | None:
        found = principal_for(request.scope, tokens)
        if found is None or found[1] is PrincipalKind.LINK:
            return None
        return found[0]

    return Mount(OWN_DOWNLOADS_PATH, app=own_downloads_app(scheduler=scheduler, identify=identify))


def _operator_page(staff: StaffMap) -> Mount:
    """The operator page, for the same staff as the API (the browser login's cookie)."""

    def authorize(request: Request) -> Identity | None:
        return staff_for(request, staff)

    return Mount(OPERATOR_PAGE_PATH, app=operator_page(authorize=authorize, api_url=API_PREFIX))


def build_app(
    root: Path,
    tokens: TokenMap,
    bandwidth: int | None = None,
    scheduler_settings: SchedulerSettings | None = None,
    *,
    ticket_key: bytes | None = None,
    scheduler: DownloadScheduler | None = None,
    database_url: str | None = None,
    schema: str = DEFAULT_SCHEMA,
    writer: bool = True,
    lease_seconds: float = 10.0,
    settings_store: SettingsStore | None = None,
    settings_path: Path | None = None,
    staff: StaffMap | None = None,
) -> Starlette:
    """The demo server for the files under ``root``.

    ``bandwidth`` (bytes per second) paces all file responses through one bucket and,
    unless ``ARKVORY_DOWNLOAD_BANDWIDTH`` set one, is the link bandwidth the start
    estimates assume. ``scheduler_settings`` default to the environment; the ticket key
    to :func:`load_ticket_key`. A ``scheduler`` passed in is used as is (tests).
    With ``database_url`` the queue is the PostgreSQL one shared by every process
    serving the same database and ``schema`` (the ticket key then lives there too);
    ``writer=False`` makes a read gateway, which never migrates or creates the key;
    it needs ``database_url``, since a gateway with a queue of its own would lose
    positions behind a load balancer (R-PG-4), so without one it raises ``ValueError``.
    The operator settings are kept in ``settings_store``, by default the shared
    queue's schema with ``database_url``, else the SQLite file ``settings_path``
    (default: ``$ARKVORY_SETTINGS_FILE`` or a hidden file in ``root``), which also
    keeps the in-memory queue's ticket key.
    ``staff`` are the bearer tokens of the operator API mounted at ``API_PREFIX``
    (none: it answers ``401`` to everyone, never open).
    Raises :class:`ConfigurationError` for bad settings or a bad key.
    """
    root = Path(root).resolve()
    if settings_path is None:
        settings_path = settings_file(root)
    if scheduler is None and not writer and database_url is None:
        raise ValueError("a read gateway (writer=False) needs database_url: the shared queue")
    if scheduler is None:
        settings = scheduler_settings or SchedulerSettings.from_env()
        if bandwidth is not None and settings.bandwidth is None:
            settings = settings.with_changes(bandwidth=bandwidth)
        if database_url is not None:
            scheduler = PostgresScheduler.from_dsn(
                database_url,
                schema=schema,
                settings=settings,
                ticket_keys=[ticket_key] if ticket_key is not None else None,
                writer=writer,
                lease_seconds=lease_seconds,
            )
        else:
            key = ticket_key
            if key is None:
                key = load_ticket_key(root, settings_path=settings_path)
            scheduler = InMemoryDownloadScheduler(settings, ticket_keys=[key])
    if settings_store is None:
        settings_store = scheduler.settings_store()  # a fleet's own, on its connections
    if settings_store is None:
        # The environment the store validates against is the one the scheduler started
        # on: a change is accepted only if this process can run it.
        environment = scheduler.settings
        if database_url is not None:
            settings_store = PostgresSettingsStore(
                database_url, environment=environment, schema=schema
            )
        else:
            settings_store = SqliteSettingsStore(settings_path, environment=environment)
    keeper = SettingsKeeper(settings_store, scheduler)
    return _assemble(root, tokens, bandwidth, scheduler, keeper, staff or {})


def _assemble(
    root: Path,
    tokens: TokenMap,
    bandwidth: int | None,
    scheduler: DownloadScheduler,
    keeper: SettingsKeeper,
    staff: StaffMap,
) -> Starlette:
    governor = BandwidthGovernor(bandwidth) if bandwidth is not None else None
    files = FileServer(root, bandwidth=governor, tokens=tokens, prefix="")
    middleware = DownloadSchedulerMiddleware(
        files,
        scheduler=scheduler,
        resolver=make_resolver(root, tokens, prefix=""),
        run_ticks=False,
    )

    # The page's chart samples every 10 s; a demo run for a screenshot may sample faster.
    history = QueueHistory(scheduler, interval=_history_seconds())

    def held() -> int:
        return middleware.held

    async def index(request: Request) -> HTMLResponse:
        entries = await anyio.to_thread.run_sync(list_files, root)
        rows = "\n".join(
            f'<li><a href="/files/{html.escape(quote(name))}">{html.escape(name)}</a>'
            f" ({size:,} bytes)</li>"
            for name, size in entries
        )
        more = "<p>(only the first files are listed)</p>" if len(entries) >= INDEX_LIMIT else ""
        page = (
            "<!doctype html><html><head><meta charset=utf-8><title>arkvory demo</title>"
            f'<link rel="icon" href="/{FAVICON_SVG}" type="image/svg+xml">'
            "</head><body><h1>arkvory demo artifact server</h1>"
            f"<ul>\n{rows}\n</ul>{more}"
            f'<p><a href="{OWN_DOWNLOADS_PATH}/">my downloads</a> · '
            '<a href="/metrics">metrics</a> · <a href="/readyz">readiness</a> · '
            f'<a href="{OPERATOR_PAGE_PATH}/">operator page</a> · '
            f'<a href="/login?next={OPERATOR_PAGE_PATH}/">log in</a></p>'
            "</body></html>"
        )
        return HTMLResponse(page)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # Started here and given back on the way out (connections, a fleet's place);
        # nothing to do for the in-memory queue.
        async with scheduler:
            try:
                async with anyio.create_task_group() as tasks:
                    # The stored settings apply before the first request and tick (or,
                    # with the store unreachable, the keeper retries, R-SET-4).
                    await tasks.start(keeper.run)
                    tasks.start_soon(run_tick_loop, scheduler)
                    tasks.start_soon(history.run)  # the operator page's last hour
                    try:
                        yield
                    finally:
                        # Waiting clients get 503 busy from now on; active downloads
                        # finish (R-RES-4). The tick loop stops with the task group.
                        with anyio.CancelScope(shield=True):
                            await scheduler.close()
                        tasks.cancel_scope.cancel()
            finally:
                with anyio.CancelScope(shield=True):
                    await keeper.store.close()

    routes: list[BaseRoute] = [
        Route("/", index, methods=["GET"]),
        Mount("/files", app=middleware),
        Route("/metrics", _Endpoint(metrics_app(scheduler, held=held))),
        Route("/readyz", _Endpoint(readiness_app(scheduler, held=held))),
        # The icon every browser asks for, and the one the demo's own pages name.
        Route(f"/{FAVICON_ICO}", _Endpoint(favicon_app(FAVICON_ICO))),
        Route(f"/{FAVICON_SVG}", _Endpoint(favicon_app(FAVICON_SVG))),
        _operator_api(scheduler, keeper, staff, history),
        _operator_page(staff),
        *login_routes(lambda token: is_known_token(token, tokens, staff)),
        _own_downloads(scheduler, tokens),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.scheduler = scheduler
    app.state.settings_store = keeper.store
    app.state.settings_keeper = keeper
    return app
