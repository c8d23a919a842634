"""How an answer to a range request is read and checked against the bytes already saved.

Once bytes are saved, every later answer must be of the same version of the object: the
same ``ETag`` and the same size. Otherwise :class:`ObjectChangedError` is raised *before*
a byte of the other version is handed out for writing, so a file never mixes two
versions (R-CLIENT-8). These checks are pure functions of the response headers and of
:class:`Saved`, so the session keeps only the bookkeeping and every rule is here once.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from ._exceptions import InvalidResponseError, ObjectChangedError

__all__ = [
    "ContentRange",
    "Saved",
    "check_same_version",
    "check_whole_version",
    "content_length",
    "parse_content_range",
    "partial_length",
    "unsatisfiable_size",
]

_CONTENT_RANGE: Final = re.compile(
    r"bytes\s+(?:(\d{1,19})-(\d{1,19})|\*)/(\d{1,19}|\*)", re.IGNORECASE
)
_CONTENT_LENGTH: Final = re.compile(r"\d{1,19}")


@dataclass(frozen=True, slots=True)
class ContentRange:
    """A parsed ``Content-Range``: ``first``..``last`` inclusive (``None`` for ``*``) of
    ``size`` bytes (``None`` when the server does not know)."""

    first: int | None
    last: int | None
    size: int | None


@dataclass(frozen=True, slots=True)
class Saved:
    """What the download holds so far: ``done`` bytes of the version ``etag`` of an
    object of ``size`` bytes (each ``None`` until a response told it)."""

    done: int
    etag: str | None
    size: int | None


def parse_content_range(value: str | None) -> ContentRange | None:
    """``bytes a-b/n``, ``bytes */n`` or ``bytes a-b/*``; ``None`` when malformed."""
    if value is None:
        return None
    match = _CONTENT_RANGE.fullmatch(value.strip())
    if match is None:
        return None
    first = int(match[1]) if match[1] is not None else None
    last = int(match[2]) if match[2] is not None else None
    size = int(match[3]) if match[3] != "*" else None
    if first is not None and last is not None and last < first:
        return None
    return ContentRange(first, last, size)


def content_length(head: Mapping[str, str]) -> int | None:
    """The ``Content-Length`` of lower-cased headers; ``None`` when absent or malformed."""
    value = head.get("content-length")
    if value is None or not _CONTENT_LENGTH.fullmatch(value.strip()):
        return None
    return int(value.strip())


def check_same_version(etag: str | None, size: int, saved: Saved) -> None:
    """Once bytes are saved, every answer must be of the same version (R-CLIENT-8)."""
    if saved.done == 0:
        return
    if saved.etag is not None and etag is None:
        raise InvalidResponseError("the ETag disappeared between ranges")
    if saved.etag is not None and etag != saved.etag:
        raise ObjectChangedError(
            f"the object changed after {saved.done} bytes were saved (ETag {saved.etag} → {etag})",
            old_etag=saved.etag,
            new_etag=etag,
        )
    if saved.size is not None and size != saved.size:
        raise ObjectChangedError(
            f"the object's size changed from {saved.size} to {size} mid-download",
            old_etag=saved.etag,
            new_etag=etag,
        )


def partial_length(head: Mapping[str, str], saved: Saved) -> tuple[int, int]:
    """The body length and the object's size of a ``206`` to a range from ``saved.done``.

    ``head`` has lower-cased names. Raises :class:`InvalidResponseError` for an answer
    that is not the single range asked for, :class:`ObjectChangedError` for another
    version.
    """
    if "multipart/" in head.get("content-type", "").lower():
        raise InvalidResponseError("a multipart answer to a single range")
    parsed = parse_content_range(head.get("content-range"))
    if parsed is None or parsed.first is None or parsed.last is None:
        raise InvalidResponseError("206 without a usable Content-Range")
    if parsed.size is None:
        raise InvalidResponseError("206 without the object's size in Content-Range")
    check_same_version(head.get("etag"), parsed.size, saved)
    if parsed.first != saved.done or parsed.last >= parsed.size:
        raise InvalidResponseError(
            f"asked for bytes from {saved.done}, got Content-Range {head.get('content-range')!r}"
        )
    length = parsed.last - parsed.first + 1
    declared = content_length(head)
    if declared is not None and declared != length:
        raise InvalidResponseError(f"Content-Length {declared} disagrees with Content-Range")
    return length, parsed.size


def check_whole_version(etag: str | None, saved: Saved, *, sent_if_range: bool) -> None:
    """A ``200`` after bytes were saved: the server ignored ``Range`` or ``If-Range``
    failed. Only the same version may replace the saved bytes (then from zero)."""
    known = etag is not None and saved.etag is not None
    if etag != saved.etag and (sent_if_range or known):
        raise ObjectChangedError(
            f"the object changed after {saved.done} bytes were saved (ETag {saved.etag} → {etag})",
            old_etag=saved.etag,
            new_etag=etag,
        )


def unsatisfiable_size(head: Mapping[str, str], saved: Saved) -> int:
    """The object's size when a ``416`` means the saved bytes are all of it.

    Any other ``416`` raises: :class:`ObjectChangedError` when the object is now of
    another size, :class:`InvalidResponseError` when the answer makes no sense.
    """
    parsed = parse_content_range(head.get("content-range"))
    size = parsed.size if parsed is not None and parsed.first is None else None
    if size is None:
        size = saved.size
    if size is None:
        raise InvalidResponseError("416 without the object's size")
    if size == saved.done:
        check_same_version(head.get("etag"), size, saved)
        return size
    if saved.done > size or (saved.size is not None and size != saved.size):
        raise ObjectChangedError(
            f"the object is {size} bytes now; {saved.done} were saved",
            old_etag=saved.etag,
            new_etag=head.get("etag"),
        )
    raise InvalidResponseError(f"416 for a range inside the object's {size} bytes")
