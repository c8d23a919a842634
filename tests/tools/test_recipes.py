"""docs/clients.md's recipes, each run with the real tool through a queue busy past the hold.

Every test keeps the only slot busy, lets the tool be held and answered ``503``, frees
the slot once the proxy has seen that answer, and then checks three things: the tool
exits 0, the bytes it wrote are the served file's (for an installer, the installed
payload is the packed one), and its wait after each ``503`` shows whether it followed
``Retry-After`` or its own delay.

A tool that follows ``Retry-After`` has an own delay that would be longer, and must come
back after ``Retry-After``, well before its own delay; one that does not has an own delay
longer than any ``Retry-After`` this queue sends (1 or 2 s for the head of the queue),
and must come back after its own. The bounds that decide are lower bounds: a slow
machine only adds to a wait.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Final

from tests.integration.conftest import require_tool

from ._packages import build_npm_tarball, build_wheel
from ._recipes import (
    ARIA2C_RECIPE,
    CURL_RECIPE,
    WGET_RECIPE,
    aria2c_command,
    curl_command,
    npm_command,
    npmrc,
    pip_command,
    pip_conf,
    replaced,
    wget_command,
)
from .conftest import BusyQueue, ToolRun, sha256_file, tool_environment

CLIENTS_PAGE: Final = Path(__file__).parents[2] / "docs" / "clients.md"
#: Timers fire at or after their time; this only absorbs rounding of the clock reads.
TOLERANCE: Final = 0.05
#: Shorter than the page's 10 s, to keep the suite quick; still longer than any
#: Retry-After the head of this queue is sent.
ARIA2C_WAIT_SECONDS: Final = 3
NPM_WAIT_SECONDS: Final = 3
#: What curl would wait without Retry-After: its --retry-delay.
CURL_OWN_DELAY: Final = float(CURL_RECIPE[CURL_RECIPE.index("--retry-delay") + 1])
#: pip (urllib3) retries at once the first time: any wait at all is Retry-After's.
PIP_OWN_DELAY: Final = 0.0


def _served_file(busy_queue: BusyQueue, name: str) -> str:
    """Write random bytes the size of a small package; return their SHA-256."""
    data = os.urandom(64 * 1024)
    (busy_queue.root / name).write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def _assert_queued_then_served(run: ToolRun, refusals: int) -> None:
    assert run.returncode == 0, run.output
    assert run.statuses == [503] * refusals + [200], (run.statuses, run.output)
    assert all(exchange.method == "GET" for exchange in run.exchanges)


def _assert_followed_retry_after(run: ToolRun, own_delay: float) -> None:
    """Each wait after a ``503`` was at least its ``Retry-After``; where the tool's own
    delay is longer, it came back nearer to ``Retry-After`` than to that delay."""
    for retry_after, waited in run.waits():
        assert retry_after is not None and waited >= retry_after - TOLERANCE, run.waits()
        if own_delay > retry_after:
            assert waited < (retry_after + own_delay) / 2, run.waits()


def _assert_followed_own_delay(waits: list[tuple[int | None, float]], own_delay: float) -> None:
    """Each wait after a ``503`` was the tool's own delay, longer than the
    ``Retry-After`` it had been given."""
    for retry_after, waited in waits:
        assert retry_after is not None and retry_after < own_delay, waits
        assert waited >= own_delay - TOLERANCE, waits


def test_curl_follows_retry_after_until_the_slot_frees(
    busy_queue: BusyQueue, tmp_path: Path
) -> None:
    curl = require_tool("curl")
    expected = _served_file(busy_queue, "curl.bin")
    out = tmp_path / "curl.bin"
    run = busy_queue.run(
        curl_command(curl, CURL_RECIPE, out, busy_queue.url("curl.bin")),
        name="curl.bin",
        cwd=tmp_path,
        refusals=1,
    )
    _assert_queued_then_served(run, refusals=1)
    _assert_followed_retry_after(run, own_delay=CURL_OWN_DELAY)
    assert sha256_file(out) == expected


def test_wget_waits_its_own_growing_delay_until_the_slot_frees(
    busy_queue: BusyQueue, tmp_path: Path
) -> None:
    wget = require_tool("wget")
    expected = _served_file(busy_queue, "wget.bin")
    run = busy_queue.run(
        wget_command(wget, ("--no-verbose", *WGET_RECIPE), busy_queue.url("wget.bin")),
        name="wget.bin",
        cwd=tmp_path,
        refusals=2,
    )
    _assert_queued_then_served(run, refusals=2)
    # wget waits 1 s, then 2 s, ... up to --waitretry, whatever Retry-After says: its
    # second wait is longer than the 1 s the head of the queue is asked to wait.
    first, second = run.waits()
    assert first[1] >= 1 - TOLERANCE, run.waits()
    _assert_followed_own_delay([second], own_delay=2)
    assert sha256_file(tmp_path / "wget.bin") == expected


def test_aria2c_waits_its_retry_wait_until_the_slot_frees(
    busy_queue: BusyQueue, tmp_path: Path
) -> None:
    aria2c = require_tool("aria2c")
    expected = _served_file(busy_queue, "aria2c.bin")
    recipe = replaced(ARIA2C_RECIPE, "--retry-wait", str(ARIA2C_WAIT_SECONDS))
    run = busy_queue.run(
        aria2c_command(aria2c, recipe, tmp_path, busy_queue.url("aria2c.bin")),
        name="aria2c.bin",
        cwd=tmp_path,
        refusals=1,
    )
    _assert_queued_then_served(run, refusals=1)
    _assert_followed_own_delay(run.waits(), own_delay=ARIA2C_WAIT_SECONDS)
    assert sha256_file(tmp_path / "aria2c.bin") == expected
    assert not (tmp_path / "aria2c.bin.aria2").exists()  # no control file: complete


def test_pip_follows_retry_after_with_a_timeout_longer_than_the_hold(
    busy_queue: BusyQueue, tmp_path: Path
) -> None:
    package = build_wheel(busy_queue.root)
    config = tmp_path / "pip.conf"
    config.write_text(pip_conf())
    target = tmp_path / "installed"
    run = busy_queue.run(
        pip_command(target, busy_queue.url(package.path.name)),
        name=package.path.name,
        cwd=tmp_path,
        refusals=1,
        env=tool_environment(PIP_CONFIG_FILE=str(config)),
    )
    _assert_queued_then_served(run, refusals=1)
    _assert_followed_retry_after(run, own_delay=PIP_OWN_DELAY)
    assert sha256_file(target / "arkvory_recipe_probe" / "payload.bin") == package.payload_sha256
    assert (target / "arkvory_recipe_probe-1.0.0.dist-info" / "RECORD").is_file()


def test_npm_waits_its_fetch_retry_timeout_until_the_slot_frees(
    busy_queue: BusyQueue, tmp_path: Path
) -> None:
    npm = require_tool("npm")
    package = build_npm_tarball(busy_queue.root)
    wait = str(NPM_WAIT_SECONDS * 1000)
    config = tmp_path / "npmrc"
    config.write_text(npmrc(fetch_retry_mintimeout=wait, fetch_retry_maxtimeout=wait))
    project = tmp_path / "project"
    project.mkdir()
    (project / "package.json").write_text('{"name": "recipe-test", "private": true}\n')
    registry = busy_queue.proxy.url("/npm-registry/")
    run = busy_queue.run(
        npm_command(npm, config, tmp_path / "cache", registry, busy_queue.url(package.path.name)),
        name=package.path.name,
        cwd=project,
        refusals=1,
    )
    _assert_queued_then_served(run, refusals=1)
    assert [e.target for e in busy_queue.proxy.exchanges() if "npm-registry" in e.target] == []
    _assert_followed_own_delay(run.waits(), own_delay=NPM_WAIT_SECONDS)
    installed = project / "node_modules" / package.name
    assert sha256_file(installed / "payload.bin") == package.payload_sha256


def test_the_page_shows_the_tested_recipes() -> None:
    page = CLIENTS_PAGE.read_text(encoding="utf-8")
    for recipe in (CURL_RECIPE, WGET_RECIPE, ARIA2C_RECIPE):
        assert " ".join(recipe) in page, recipe
    assert pip_conf() in page
    assert npmrc() in page
