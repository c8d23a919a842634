"""Reading setting values written as text: numbers, byte sizes, rates, booleans, weights.

Environment variables are parsed here, and so are command-line options that take the same
kinds of value (the demo's ``--bandwidth 40MB``), so that one spelling means one thing
wherever an operator types it. Each parser takes stripped text and returns a plain
value, or raises :class:`UnparsableError` saying what would have been accepted. Ranges
are not checked here: whether 0 slots can work is the settings' business
(:mod:`.fields`), not the parser's.

The accepted syntax is documented in ``docs/configuration.md`` ("Value syntax").
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal
from types import MappingProxyType
from typing import Final

__all__ = [
    "UnparsableError",
    "parse_bool",
    "parse_decimal",
    "parse_integer",
    "parse_rate",
    "parse_size",
    "parse_weights",
]


class UnparsableError(ValueError):
    """Text that is not even the right kind of value; ``expected`` says what would be.

    A caller puts ``expected`` into its own message, which names where the text came
    from (a variable, an option). It never leaves the package through the public API:
    :meth:`SchedulerSettings.from_env` turns it into a ``ConfigurationError``.
    """

    def __init__(self, expected: str) -> None:
        super().__init__(expected)
        self.expected = expected


_INTEGER: Final = re.compile(r"[+-]?[0-9]+")
_DECIMAL: Final = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")
_SIZE: Final = re.compile(r"(?P<number>[0-9]+(?:\.[0-9]+)?)\s*(?P<unit>[A-Za-z]*)")
# Keyed by the unit without its final "B", lower-cased. The "B" itself must be upper
# case: "Mb" is a megabit to many people, and a bandwidth eight times off is worse
# than a refused start-up.
_UNITS: Final[Mapping[str, int]] = MappingProxyType(
    {
        "": 1,
        "k": 1000,
        "m": 1000**2,
        "g": 1000**3,
        "t": 1000**4,
        "ki": 1024,
        "mi": 1024**2,
        "gi": 1024**3,
        "ti": 1024**4,
    }
)
_TRUE: Final = frozenset({"true", "1", "yes", "on"})
_FALSE: Final = frozenset({"false", "0", "no", "off"})


def parse_integer(text: str) -> int:
    """A whole number, optionally signed: ``16``, ``-3``."""
    if not _INTEGER.fullmatch(text):
        raise UnparsableError("a whole number")
    return int(text)


def parse_decimal(text: str) -> float:
    """A duration as people write it: ``30``, ``2.5``, ``.5``.

    No ``inf``, ``nan`` or exponents, which ``float()`` would accept: they are never
    what an operator meant by a number of seconds.
    """
    if not _DECIMAL.fullmatch(text):
        raise UnparsableError("a number, such as 30 or 2.5")
    return float(text)


def parse_size(text: str) -> int:
    """A byte count: ``16777216``, ``16MiB``, ``40 MB``, ``1.5 GiB`` (whole bytes only).

    ``KiB``/``MiB``/``GiB``/``TiB`` are powers of 1024, ``KB``/``MB``/``GB``/``TB`` powers
    of 1000; the final ``B`` must be upper case, so that ``Mb`` (megabits to many) is
    refused rather than taken eight times too large.
    """
    expected = "a whole number of bytes, or a number with a unit such as 16MiB or 40 MB"
    match = _SIZE.fullmatch(text)
    if match is None:
        raise UnparsableError(expected)
    unit = match["unit"]
    if unit and not unit.endswith("B"):
        raise UnparsableError(expected + " (upper-case B: sizes are bytes, not bits)")
    factor = _UNITS.get(unit[:-1].lower() if unit else "")
    if factor is None:
        raise UnparsableError(expected + " (units: B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)")
    size = Decimal(match["number"]) * factor
    if size != size.to_integral_value():
        raise UnparsableError(expected + " (a whole number of bytes)")
    return int(size)


def parse_rate(text: str) -> int:
    """Bytes per second: a size as :func:`parse_size` reads it, with an optional ``/s``."""
    return parse_size(text.removesuffix("/s").rstrip())


def parse_bool(text: str) -> bool:
    """``true``/``false``, ``yes``/``no``, ``on``/``off``, ``1``/``0``, in any case."""
    word = text.lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise UnparsableError("true or false (also yes/no, on/off, 1/0)")


def parse_weights(text: str) -> tuple[int, ...]:
    """Four comma-separated whole numbers, spaces allowed: ``8, 4, 2, 1``.

    Only the shape is checked; the range of each weight is the settings' to judge.
    """
    expected = (
        "four comma-separated whole numbers for interactive, release, bulk and "
        "background, such as 8,4,2,1"
    )
    parts = [part.strip() for part in text.split(",")]
    if len(parts) != 4 or not all(_INTEGER.fullmatch(part) for part in parts):
        raise UnparsableError(expected)
    return tuple(int(part) for part in parts)
