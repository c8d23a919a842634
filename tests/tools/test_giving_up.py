"""What each tool does when the queue stays busy longer than it is willing to wait.

docs/clients.md tells what a person sees then: the exit code, how many requests the tool
made, and that nothing is left behind — no file holding an error, no half-installed
package. Here every recipe runs with a small retry budget (one retry where the page
allows thousands) and the slot stays busy until all of them have given up. They run
at once, each for a file of its own, on a server of this module's own (their waiting
downloads stay in its queue until they count as no-shows).

Two mistakes the page warns about run beside them: curl without ``--fail`` saves the
``503``'s problem document as the file and exits 0, and pip with a ``timeout`` shorter
than the hold drops every held request before its answer and spends its retries on that.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final

import pytest

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
from .conftest import HOLD_SECONDS, BusyQueue, Invocation, ToolRun, tool_environment

CURL_EXIT_HTTP_ERROR: Final = 22  # curl: "HTTP page not retrieved" (with --fail)
WGET_EXIT_NETWORK_FAILURE: Final = 4  # wget's code once its retries on 503 run out
ARIA2C_EXIT_UNAVAILABLE: Final = 29  # aria2c: "the server was unable to handle the request"
PIP_EXIT_ERROR: Final = 1
NPM_EXIT_ERROR: Final = 1
PROJECT_MANIFEST: Final = '{"name": "recipe-test", "private": true}\n'


def _file_call(
    busy_queue: BusyQueue, name: str, argv_for: Callable[[str], list[str]], work: Path
) -> Invocation:
    """A tool's call for a file of its own, ``name``, written into the served directory."""
    (busy_queue.root / name).write_bytes(os.urandom(64 * 1024))
    return Invocation(argv_for(busy_queue.url(name)), name, work)


def _pip_call(busy_queue: BusyQueue, name: str, config: str, work: Path) -> Invocation:
    """pip installing the wheel served under ``name/``, with ``config`` as its pip.conf.
    The same wheel under two paths is two objects, so two downloads in the queue."""
    (busy_queue.root / name).mkdir()
    wheel = build_wheel(busy_queue.root / name)
    (work / "pip.conf").write_text(config)
    served = f"{name}/{wheel.path.name}"
    argv = pip_command(work / "installed", busy_queue.url(served))
    return Invocation(argv, served, work, tool_environment(PIP_CONFIG_FILE=str(work / "pip.conf")))


def _npm_call(busy_queue: BusyQueue, work: Path) -> Invocation:
    """npm with one retry a second later, installing into a project of its own."""
    npm = require_tool("npm")
    tarball = build_npm_tarball(busy_queue.root)
    config = work / "npmrc"
    config.write_text(
        npmrc(fetch_retries="1", fetch_retry_mintimeout="1000", fetch_retry_maxtimeout="1000")
    )
    project = work / "project"
    project.mkdir()
    (project / "package.json").write_text(PROJECT_MANIFEST)
    registry = busy_queue.proxy.url("/npm-registry/")
    argv = npm_command(npm, config, work / "cache", registry, busy_queue.url(tarball.path.name))
    return Invocation(argv, tarball.path.name, project)


@pytest.fixture(scope="module")
def gave_up(
    busy_queue: BusyQueue, tmp_path_factory: pytest.TempPathFactory
) -> Mapping[str, tuple[ToolRun, Path]]:
    """Every tool's run, and the directory it worked in, by a short name."""
    names = ("curl", "curl-no-fail", "wget", "aria2c", "pip", "pip-timeout", "npm")
    work = {name: tmp_path_factory.mktemp(name) for name in names}
    curl, wget, aria2c = require_tool("curl"), require_tool("wget"), require_tool("aria2c")
    curl_recipe = replaced(CURL_RECIPE, "--retry", "1")
    wget_recipe = replaced(WGET_RECIPE, "--tries", "2")
    aria2c_recipe = replaced(replaced(ARIA2C_RECIPE, "--max-tries", "2"), "--retry-wait", "1")
    calls = {
        "curl": _file_call(
            busy_queue,
            "curl.bin",
            lambda url: curl_command(curl, curl_recipe, work["curl"] / "curl.bin", url),
            work["curl"],
        ),
        "curl-no-fail": _file_call(
            busy_queue,
            "curl-no-fail.bin",
            lambda url: curl_command(curl, (), work["curl-no-fail"] / "curl-no-fail.bin", url),
            work["curl-no-fail"],
        ),
        "wget": _file_call(
            busy_queue,
            "wget.bin",
            lambda url: wget_command(wget, wget_recipe, url),
            work["wget"],
        ),
        "aria2c": _file_call(
            busy_queue,
            "aria2c.bin",
            lambda url: aria2c_command(aria2c, aria2c_recipe, work["aria2c"], url),
            work["aria2c"],
        ),
        "pip": _pip_call(busy_queue, "pip", pip_conf(retries="1"), work["pip"]),
        "pip-timeout": _pip_call(
            busy_queue,
            "pip-timeout",
            pip_conf(retries="1", timeout=str(HOLD_SECONDS / 2)),
            work["pip-timeout"],
        ),
        "npm": _npm_call(busy_queue, work["npm"]),
    }
    runs = busy_queue.run_while_busy(calls)
    return {name: (runs[name], work[name]) for name in calls}


def test_curl_with_fail_exits_22_and_writes_no_file(
    gave_up: Mapping[str, tuple[ToolRun, Path]],
) -> None:
    run, work = gave_up["curl"]
    assert run.returncode == CURL_EXIT_HTTP_ERROR, run.output
    assert run.statuses == [503, 503]  # the first try and one retry
    assert list(work.iterdir()) == []


def test_curl_without_fail_saves_the_problem_document_as_the_file(
    gave_up: Mapping[str, tuple[ToolRun, Path]],
) -> None:
    run, work = gave_up["curl-no-fail"]
    assert run.returncode == 0, run.output
    assert run.statuses == [503]
    saved = json.loads((work / "curl-no-fail.bin").read_bytes())
    assert saved["reason"] == "download_queued"


def test_wget_gives_up_with_exit_4_and_writes_no_file(
    gave_up: Mapping[str, tuple[ToolRun, Path]],
) -> None:
    run, work = gave_up["wget"]
    assert run.returncode == WGET_EXIT_NETWORK_FAILURE, run.output
    assert run.statuses == [503, 503]  # --tries=2
    assert "Giving up." in run.output
    assert list(work.iterdir()) == []


def test_aria2c_gives_up_with_exit_29_and_writes_no_file(
    gave_up: Mapping[str, tuple[ToolRun, Path]],
) -> None:
    run, work = gave_up["aria2c"]
    assert run.returncode == ARIA2C_EXIT_UNAVAILABLE, run.output
    assert run.statuses == [503, 503]  # --max-tries=2
    assert list(work.iterdir()) == []


def test_pip_gives_up_with_exit_1_and_installs_nothing(
    gave_up: Mapping[str, tuple[ToolRun, Path]],
) -> None:
    run, work = gave_up["pip"]
    assert run.returncode == PIP_EXIT_ERROR, run.output
    assert run.statuses == [503, 503]  # retries = 1
    assert "too many 503 error responses" in run.output
    assert not (work / "installed").exists()


def test_pip_with_a_timeout_shorter_than_the_hold_never_sees_the_answer(
    gave_up: Mapping[str, tuple[ToolRun, Path]],
) -> None:
    run, work = gave_up["pip-timeout"]
    assert run.returncode == PIP_EXIT_ERROR, run.output
    # Both requests were dropped by pip while the server held them.
    assert len(run.exchanges) == 2
    assert "Read timed out" in run.output
    assert not (work / "installed").exists()


def test_npm_gives_up_with_e503_and_installs_nothing(
    gave_up: Mapping[str, tuple[ToolRun, Path]],
) -> None:
    run, work = gave_up["npm"]
    assert run.returncode == NPM_EXIT_ERROR, run.output
    assert run.statuses == [503, 503]  # fetch-retries=1
    assert "npm error code E503" in run.output
    project = work / "project"
    assert sorted(path.name for path in project.iterdir()) == ["package.json"]
    assert (project / "package.json").read_text() == PROJECT_MANIFEST
