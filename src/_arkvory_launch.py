"""Where ``arkvory-demo`` and ``arkvory-sched`` start: outside the server package, on purpose.

An install of ``arkvory-sched`` without extras is the client only, and the server's
packages come with the ``server`` extra (ADR 0026). A distribution installs all its scripts whatever
extras were asked for, so a client-only install has these two commands too. Their code
lives in ``arkvory_sched``, and importing anything there runs the package's
``__init__``, which needs starlette, asyncpg and the rest. A script pointing straight at
``arkvory_sched.demo._cli:main`` would therefore die in a traceback before its ``main``
could say anything. These launchers import the command inside a ``try`` instead, and
turn a missing server dependency, and only that, into one line naming what to install
and exit code 2 (the commands' code for bad usage or configuration).

The package is not published on any index, so ``pip install 'arkvory-sched[server]'``
would find nothing. The line names the checkout or the wheel this install came from
instead: pip records it in the distribution's ``direct_url.json`` (PEP 610), and adding
``[server]`` to that path is the command that really works. When the record is missing,
or names a path that is gone, the line says what works from a checkout or a wheel.

This module imports nothing but the standard library, so it starts even when the
install is broken in other ways.
"""

from __future__ import annotations

import json
import shlex
import sys
from importlib import metadata
from pathlib import Path
from typing import Final, TextIO
from urllib.parse import unquote, urlsplit

__all__ = [
    "DISTRIBUTION",
    "EXIT_NO_SERVER",
    "SERVER_MODULES",
    "demo",
    "install_hint",
    "missing_server",
    "sched",
]

DISTRIBUTION: Final = "arkvory-sched"
EXIT_NO_SERVER: Final = 2
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
        f"install it with: {install_hint()}",
        file=stderr,
    )
    return EXIT_NO_SERVER


def install_hint(distribution: metadata.Distribution | None = None) -> str:
    """The command that adds the ``server`` extra to this install.

    ``distribution`` is the installed ``arkvory-sched`` (looked up when ``None``). When
    pip recorded a local checkout or wheel that still exists, the command names it,
    with ``-e`` for an editable install; otherwise it says what works from a checkout
    and from a wheel (the package is on no index).
    """
    if distribution is None:
        try:
            distribution = metadata.distribution(DISTRIBUTION)
        except metadata.PackageNotFoundError:
            distribution = None
    origin = None if distribution is None else _installed_from(distribution)
    if origin is None:
        version = "VERSION" if distribution is None else distribution.version
        wheel = f"arkvory_sched-{version}-py3-none-any.whl"
        return (
            "pip install '.[server]' in a checkout of arkvory-sched, "
            f"or pip install '{wheel}[server]' with a wheel built from one"
        )
    path, editable = origin
    return f"pip install {'-e ' if editable else ''}{shlex.quote(f'{path}[server]')}"


def _installed_from(distribution: metadata.Distribution) -> tuple[Path, bool] | None:
    """The local directory or wheel pip installed from, and whether editably (PEP 610)."""
    try:
        text = distribution.read_text("direct_url.json")
        record = json.loads(text) if text else None
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or not isinstance(record.get("url"), str):
        return None
    url = urlsplit(record["url"])
    if url.scheme != "file" or url.netloc not in ("", "localhost"):
        return None
    path = Path(unquote(url.path))
    dir_info = record.get("dir_info")
    if isinstance(dir_info, dict) and path.is_dir():
        return path, dir_info.get("editable") is True
    if "archive_info" in record and path.is_file() and path.suffix == ".whl":
        return path, False
    return None
