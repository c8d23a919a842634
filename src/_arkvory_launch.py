"""Where ``arkvory-demo`` and ``arkvory-sched`` start: outside the server package, on purpose.

``pip install arkvory-sched`` installs the client only, and the server's packages come
with the ``server`` extra (ADR 0026). A distribution installs all its scripts whatever
extras were asked for, so a client-only install has these two commands too. Their code
lives in ``arkvory_sched``, and importing anything there runs the package's
``__init__``, which needs starlette, asyncpg and the rest. A script pointing straight at
``arkvory_sched.demo._cli:main`` would therefore die in a traceback before its ``main``
could say anything. These launchers import the command inside a ``try`` instead, and
turn a missing server dependency, and only that, into one line naming what to install
and exit code 2 (the commands' code for bad usage or configuration).

This module imports nothing but the standard library, so it starts even when the
install is broken in other ways.
"""

from __future__ import annotations

import sys
from typing import Final, TextIO

__all__ = ["EXIT_NO_SERVER", "INSTALL_SERVER", "SERVER_MODULES", "demo", "missing_server", "sched"]

EXIT_NO_SERVER: Final = 2
INSTALL_SERVER: Final = "pip install 'arkvory-sched[server]'"
SERVER_MODULES: Final = frozenset(
    {
        "asyncpg",
        "itsdangerous",
        "prometheus_client",
        "sortedcontainers",
        "starlette",
        "tzdata",
        "uvicorn",
    }
)
"""The top-level modules the ``server`` extra installs (checked against pyproject.toml)."""


def demo() -> int:
    """``arkvory-demo``: the demo artifact server (``arkvory_sched.demo``)."""
    try:
        from arkvory_sched.demo._cli import main  # noqa: PLC0415 (the point of the module)
    except ModuleNotFoundError as error:
        return missing_server("arkvory-demo", error, sys.stderr)
    return main(None)


def sched() -> int:
    """``arkvory-sched``: the PostgreSQL queue's administration (``migrate``)."""
    try:
        from arkvory_sched.postgres._cli import main  # noqa: PLC0415 (likewise)
    except ModuleNotFoundError as error:
        return missing_server("arkvory-sched", error, sys.stderr)
    return main(None)


def missing_server(prog: str, error: ModuleNotFoundError, stderr: TextIO) -> int:
    """Say what to install when ``error`` is a missing server dependency; else re-raise.

    Any other missing module is a bug or a broken install that the one-line hint would
    hide, so its traceback is kept.
    """
    missing = (error.name or "").partition(".")[0]
    if missing not in SERVER_MODULES:
        raise error
    print(
        f"{prog}: the server is not installed (no module {missing!r}); "
        f"install it with: {INSTALL_SERVER}",
        file=stderr,
    )
    return EXIT_NO_SERVER
