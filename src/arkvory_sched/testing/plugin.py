"""The pytest plugin of the contract suite: its fixtures, on the store you name.

Load it with ``-p arkvory_sched.testing.plugin`` (or ``pytest_plugins`` in your
top-level ``conftest.py``) and name the store's :data:`StoreFactory` with
``--arkvory-store module:factory`` or the ini value ``arkvory_store``; a project that
collects the suite's modules itself may instead override the ``arkvory_store_factory``
fixture. The fixtures are the ones the suite's tests ask for: ``clock`` (a fresh
:class:`FakeClock`), ``make_scheduler``, ``scheduler`` and ``anyio_backend``.

It is not registered as a ``pytest11`` entry point on purpose: fixtures named
``clock`` and ``scheduler`` would then appear in every project that installs the
package.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from .._port import DownloadScheduler
from ._clock import FakeClock
from ._suite import MakeScheduler, StoreFactory, contract_schedulers, load_store_factory

__all__ = [
    "anyio_backend",
    "arkvory_store_factory",
    "clock",
    "make_scheduler",
    "pytest_addoption",
    "scheduler",
]

# The suite's helpers assert too; rewritten, their failures say what was decided.
pytest.register_assert_rewrite("arkvory_sched.testing.contract")

_OPTION = "--arkvory-store"
_INI = "arkvory_store"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("arkvory", "the arkvory-sched contract suite")
    group.addoption(
        _OPTION,
        dest=_INI,
        metavar="MODULE:FACTORY",
        default=None,
        help="the DownloadScheduler factory the contract suite checks",
    )
    parser.addini(_INI, "the DownloadScheduler factory the contract suite checks (MODULE:FACTORY)")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def arkvory_store_factory(request: pytest.FixtureRequest) -> StoreFactory:
    """The store under test, as named by ``--arkvory-store`` or ``arkvory_store``."""
    spec = request.config.getoption(_INI) or request.config.getini(_INI)
    if not spec:
        pytest.fail(
            f"no store to check: pass {_OPTION} MODULE:FACTORY, set {_INI} in the ini "
            "file, or override the arkvory_store_factory fixture",
            pytrace=False,
        )
    return load_store_factory(str(spec))


@pytest.fixture
async def make_scheduler(
    arkvory_store_factory: StoreFactory, clock: FakeClock
) -> AsyncIterator[MakeScheduler]:
    async with contract_schedulers(arkvory_store_factory, clock) as make:
        yield make


@pytest.fixture
async def scheduler(make_scheduler: MakeScheduler) -> DownloadScheduler:
    """A scheduler with :func:`contract_settings` on the test's :class:`FakeClock`."""
    return await make_scheduler()
