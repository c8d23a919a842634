"""The demo server with a busy queue, for the operator page's browser tests.

:class:`PageDemo` is ``arkvory-demo serve`` as a real process on a PostgreSQL schema
(so a second process can share its settings), with two slots, a slow link and staff
tokens for the operator API and the page. :class:`Downloads` keeps real downloads in
its queue: SDK clients in threads, each a different principal and class, two holding
the slots and the rest waiting, none finishing while the tests run (24 MiB each over a
link of 256 KiB/s). The queue history samples every second, so the page's chart has
a curve after a few seconds.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Coroutine, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final, TypeVar

import httpx
import pytest
from playwright.sync_api import Page

from arkvory_client import Client
from arkvory_sched.api import API_PREFIX
from tests.integration.conftest import DemoServer, write_pattern_file
from tests.pg import drop_schema, new_schema, require_database

T = TypeVar("T")

OPERATOR_TOKEN: Final = "op-olga"
SECOND_OPERATOR_TOKEN: Final = "op-oscar"
VIEWER_TOKEN: Final = "view-victor"
STAFF_OPTIONS: Final = (
    "--operator-token",
    f"{OPERATOR_TOKEN}=olga",
    "--operator-token",
    f"{SECOND_OPERATOR_TOKEN}=oscar",
    "--viewer-token",
    f"{VIEWER_TOKEN}=victor",
)
#: Who downloads: token, principal, kind, and the class the client asks for (None: the
#: default of its kind).
DOWNLOADERS: Final = (
    ("alice-token", "alice", "person", None),
    ("ci-token", "ci-agent", "service", None),
    ("ci-token", "ci-agent", "service", None),
    ("mirror-token", "nightly-mirror", "service", "bulk"),
    ("backup-token", "backup-bot", "service", "background"),
    ("backup-token", "backup-bot", "service", "background"),
)
FILE_BYTES: Final = 24 * 1024 * 1024
BANDWIDTH: Final = 256 * 1024
BUSY_ENV: Final[Mapping[str, str]] = {
    "ARKVORY_MAX_DOWNLOAD_SESSIONS": "2",
    "ARKVORY_DOWNLOAD_RESERVE": "0",
    "ARKVORY_DOWNLOAD_SESSION_MIN_BYTES": "1MiB",
    "ARKVORY_DOWNLOAD_PREEMPT": "false",
    "ARKVORY_DEMO_HISTORY_SECONDS": "1",
}
PAGE_PATH: Final = "/admin/downloads/"
ANSWER_SECONDS: Final = 30.0  # a generous deadline for the server's first answer


def operator_headers(token: str = OPERATOR_TOKEN) -> dict[str, str]:
    """What a tool sends with a write: credentials, JSON, the anti-CSRF header."""
    return {
        "authorization": f"Bearer {token}",
        "content-type": "application/json",
        "arkvory-request": "1",
    }


class PageDemo(DemoServer):
    """One demo process on ``schema`` of the PostgreSQL at ``database_url``."""

    def __init__(
        self, root: Path, log_path: Path, *, database_url: str, schema: str, busy: bool = True
    ) -> None:
        tokens = sorted({f"{token}={name}:{kind}" for token, name, kind, _ in DOWNLOADERS})
        env = {"ARKVORY_DATABASE_URL": database_url, **(BUSY_ENV if busy else {})}
        super().__init__(
            root, log_path, env=env, bandwidth=BANDWIDTH if busy else None, tokens=tokens
        )
        self._argv += ["--schema", schema, *STAFF_OPTIONS]
        self.schema = schema
        self.database_url = database_url

    @property
    def api_url(self) -> str:
        return f"{self.base_url}{API_PREFIX}"

    @property
    def page_url(self) -> str:
        return f"{self.base_url}{PAGE_PATH}"

    def api(self, path: str, token: str = OPERATOR_TOKEN) -> Any:
        """GET a document of the operator API."""
        response = httpx.get(
            f"{self.api_url}{path}", headers={"authorization": f"Bearer {token}"}, timeout=10.0
        )
        assert response.status_code == 200, response.text
        return response.json()

    def put_settings(self, body: Mapping[str, object], token: str = OPERATOR_TOKEN) -> Any:
        response = httpx.put(
            f"{self.api_url}/settings", json=dict(body), headers=operator_headers(token)
        )
        assert response.status_code == 200, response.text
        return response.json()


class Downloads:
    """Real downloads through the demo's queue, in threads, until :meth:`stop`."""

    def __init__(self, server: PageDemo, scratch: Path) -> None:
        self._server = server
        self._scratch = scratch
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []

    def start(self) -> None:
        """Start the downloads one after another, each once the server has answered the
        one before (queued or started): a queue in a known order, in which the first
        two hold the slots."""
        for index, (token, _name, _kind, wanted) in enumerate(DOWNLOADERS):
            name = f"artifact-{index}.bin"
            write_pattern_file(self._server.root / name, FILE_BYTES)
            answered = threading.Event()
            thread = threading.Thread(
                target=self._download,
                args=(token, name, wanted, answered),
                name=f"download-{index}",
                daemon=True,
            )
            self._threads.append(thread)
            thread.start()
            if not answered.wait(ANSWER_SECONDS):
                raise AssertionError(f"{name}: no answer in {ANSWER_SECONDS} s: {self.errors}")

    def _download(
        self, token: str, name: str, wanted: str | None, answered: threading.Event
    ) -> None:
        try:
            with Client(headers={"Authorization": f"Bearer {token}"}) as client:
                client.download(
                    self._server.url(name),
                    self._scratch / name,
                    download_class=wanted,
                    wait_limit=3600,
                    cancelled=self._stop.is_set,
                    on_event=lambda event: answered.set(),
                )
        except Exception as error:
            if not self._stop.is_set():
                self.errors.append(error)
        finally:
            answered.set()

    def wait_busy(self, timeout: float = 30.0) -> dict[str, Any]:
        """Wait until both slots are held and the rest wait; return that ``/state``."""
        deadline = time.monotonic() + timeout
        state: dict[str, Any] = {}
        while time.monotonic() < deadline:
            state = self._server.api("/state")
            if state["active"] == 2 and state["waiting"] == len(DOWNLOADERS) - 2:
                return state
            time.sleep(0.2)
        raise AssertionError(f"the queue did not fill: {state}; errors {self.errors}")

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(15.0)


def wait_for(page: Page, expression: str, timeout: float = 15.0) -> None:
    """Until ``expression`` is true in the page. ``page.wait_for_function`` cannot do it
    here: it polls by evaluating a string, which the page's policy (no eval) refuses."""
    deadline = time.monotonic() + timeout
    while not page.evaluate(f"() => Boolean({expression})"):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {expression}")
        page.wait_for_timeout(100)


def log_in(page: Page, server: PageDemo, token: str = OPERATOR_TOKEN) -> None:
    """Log in through the demo's login form and land on the operator page."""
    page.goto(f"{server.base_url}/login?next={PAGE_PATH}")
    page.get_by_label("Token").fill(token)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(server.page_url)
    page.locator("#classes tbody tr").first.wait_for()


def _run_apart(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to its end in a thread of its own: Playwright's synchronous API
    keeps an event loop running in the test's thread, where ``asyncio.run`` refuses."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


@pytest.fixture(scope="package")
def busy_demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PageDemo]:
    """One demo process with a busy queue for all the browser tests."""
    url = require_database()
    schema = _run_apart(new_schema("page"))
    root = tmp_path_factory.mktemp("served")
    scratch = tmp_path_factory.mktemp("downloaded")
    server = PageDemo(root, root.parent / "page-demo.log", database_url=url, schema=schema)
    downloads = Downloads(server, scratch)
    try:
        server.start()
        downloads.start()
        downloads.wait_busy()
        yield server
    finally:
        downloads.stop()
        server.stop()
        _run_apart(drop_schema(schema))
