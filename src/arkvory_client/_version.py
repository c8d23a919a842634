"""The installed version, for ``arkvoryctl --version``.

It is read from the distribution's metadata (``importlib.metadata``) rather than kept in
a constant, so pyproject.toml stays the one place it is written. The client keeps its
own copy of these lines instead of borrowing the server's: ``arkvory_client`` imports
nothing of ``arkvory_sched``, which a client-only install does not have (ADR 0026).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Final

__all__ = ["DISTRIBUTION", "UNKNOWN", "installed_version"]

DISTRIBUTION: Final = "arkvory-sched"
UNKNOWN: Final = "unknown (not installed)"


def installed_version() -> str:
    """``0.1.0``, say; a source tree on ``PYTHONPATH`` that was never installed says so."""
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return UNKNOWN
