"""Priority classes and how a request's class is chosen (R-CLASS-1, -2, -4).

Classes are ordered from the most to the least urgent; a client may only move itself
down this order, never up, so the class a header asks for is compared by rank.
"""

from __future__ import annotations

from enum import StrEnum

from ._exceptions import InvalidRequestError

__all__ = ["DownloadClass", "PrincipalKind", "applied_class", "default_class"]


class DownloadClass(StrEnum):
    """The four built-in priority classes, most urgent first."""

    INTERACTIVE = "interactive"
    RELEASE = "release"
    BULK = "bulk"
    BACKGROUND = "background"

    @property
    def rank(self) -> int:
        """0 for ``interactive`` … 3 for ``background``; a larger rank is less urgent."""
        return _RANKS[self]

    @classmethod
    def by_rank(cls, rank: int) -> DownloadClass:
        return _BY_RANK[rank]


_BY_RANK: tuple[DownloadClass, ...] = tuple(DownloadClass)
_RANKS: dict[DownloadClass, int] = {cls: index for index, cls in enumerate(_BY_RANK)}


class PrincipalKind(StrEnum):
    """Who is downloading: decides the safe default class (R-CLASS-2)."""

    PERSON = "person"
    SERVICE = "service"
    LINK = "link"


# Enum members bound once (why: _model.py, next to RangeKind); this runs per request.
_PERSON = PrincipalKind.PERSON
_INTERACTIVE, _RELEASE = DownloadClass.INTERACTIVE, DownloadClass.RELEASE


def default_class(kind: PrincipalKind) -> DownloadClass:
    """People get ``interactive``; service accounts and links get ``release``."""
    return _INTERACTIVE if kind is _PERSON else _RELEASE


def applied_class(base: DownloadClass, requested: str | None) -> DownloadClass:
    """The class a request runs in, given its base class and an optional header value.

    A request may lower its class but never raise it: asking for a more urgent class
    than the base silently keeps the base. An unknown value is a client error.
    """
    if requested is None:
        return base
    value = requested.strip().lower()
    try:
        asked = DownloadClass(value)
    except ValueError:
        raise InvalidRequestError(
            "download_class",
            f"unknown download class {requested[:40]!r}; expected one of "
            + ", ".join(cls.value for cls in DownloadClass),
        ) from None
    return asked if asked.rank > base.rank else base
