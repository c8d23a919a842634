"""The shipped checker, run as a store written elsewhere runs it: in a process of its own.

The third-party store below lives in a module of its own outside this repository's
tests: a ``DownloadScheduler`` of its own class that keeps its queue in our in-memory
store and takes every default of the port (no fast path, nothing to connect, a queue of
its own process). The checker is named on the command line exactly as the README
says, and nothing of ``tests/`` is importable in that process.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

THIRD_PARTY_STORE = '''
"""A store written elsewhere: the port over a queue it keeps in our in-memory store."""

from arkvory_sched import DownloadScheduler, InMemoryDownloadScheduler


class WrappedScheduler(DownloadScheduler):
    def __init__(self, inner, *, forgets_reports=False):
        self._inner = inner
        self._forgets_reports = forgets_reports
        self._started = False

    async def start(self):
        self._started = True

    async def admit(self, request):
        assert self._started, "the checker uses a store only after start()"
        return await self._inner.admit(request)

    async def report(self, grant, outcome):
        if not self._forgets_reports:
            await self._inner.report(grant, outcome)

    async def progress(self, grant, nbytes):
        await self._inner.progress(grant, nbytes)

    async def wait_for_change(self, timeout):
        await self._inner.wait_for_change(timeout)

    async def tick(self):
        return await self._inner.tick()

    async def configure(self, settings):
        await self._inner.configure(settings)

    async def stats(self):
        return await self._inner.stats()

    async def queue_state(self):
        return await self._inner.queue_state()

    async def downloads_of(self, principal, *, limit=50):
        return await self._inner.downloads_of(principal, limit=limit)

    async def close(self):
        await self._inner.close()

    @property
    def settings(self):
        return self._inner.settings


def make_scheduler(settings, clock, ticket_keys):
    return WrappedScheduler(
        InMemoryDownloadScheduler(settings, clock=clock, ticket_keys=ticket_keys)
    )


def make_forgetful_scheduler(settings, clock, ticket_keys):
    """Breaks R-RES-3: a report never gives the place back."""
    inner = InMemoryDownloadScheduler(settings, clock=clock, ticket_keys=ticket_keys)
    return WrappedScheduler(inner, forgets_reports=True)
'''

FAST_PATH_TESTS = 10  # the fast-path tests a store without the fast path skips


def _checker(tmp_path: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """``pytest -p arkvory_sched.testing.plugin … --pyargs arkvory_sched.testing.contract``
    in ``tmp_path``, where the third-party store's module is the only one added."""
    (tmp_path / "third_party_store.py").write_text(THIRD_PARTY_STORE, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = str(tmp_path)  # the store's module; not this checkout's tests
    command = [
        *(sys.executable, "-m", "pytest", "-p", "arkvory_sched.testing.plugin"),
        *options,
        *("--pyargs", "arkvory_sched.testing.contract"),
        *("-q", "-rs", "-p", "no:cacheprovider", "-W", "error", "--strict-markers"),
    ]
    return subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False
    )


def test_a_third_party_store_passes_the_shipped_checker(tmp_path: Path) -> None:
    done = _checker(tmp_path, "--arkvory-store", "third_party_store:make_scheduler")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    summary = re.search(r"(\d+) passed, (\d+) skipped", output)
    assert summary is not None, output
    passed, skipped = int(summary[1]), int(summary[2])
    assert passed > 150, output  # the whole suite ran, not one module of it
    assert skipped == FAST_PATH_TESTS, output
    assert "WrappedScheduler declines the optional FastPath" in output


def test_the_checker_fails_a_store_that_breaks_a_rule(tmp_path: Path) -> None:
    done = _checker(tmp_path, "--arkvory-store", "third_party_store:make_forgetful_scheduler", "-x")
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "1 failed" in output, output


def test_the_checker_says_which_store_it_needs(tmp_path: Path) -> None:
    done = _checker(tmp_path, "-x")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "no store to check: pass --arkvory-store MODULE:FACTORY" in done.stdout
