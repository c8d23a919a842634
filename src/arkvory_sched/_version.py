"""The installed version, for the ``--version`` of ``arkvory-demo`` and ``arkvory-sched``.

It is read from the distribution's metadata (``importlib.metadata``) rather than kept in
a constant, so pyproject.toml stays the one place it is written. ``arkvory_client`` has
its own copy of these lines, because it must not import this package (ADR 0026).
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
