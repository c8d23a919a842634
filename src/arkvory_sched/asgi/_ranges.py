"""The HTTP ``Range`` request header of a GET, resolved against the object's size.

RFC 9110 §14 (``bytes`` unit only). The header reaches us from anyone on the network,
so parsing is defensive: the header length and the number of ranges are capped, the
work is linear in the header's length, and arbitrarily long digit strings are compared
and clamped as text instead of being converted into huge integers. Whatever cannot be
parsed is ignored, which RFC 9110 allows, and the whole object is served instead.

Grammar accepted (RFC 9110 §14.1.1, §14.1.2, and the list rules of §5.6.1)::

    Range        = "bytes" "=" range-set          ; unit case-insensitive, no OWS at "="
    range-set    = 1#range-spec                   ; empty elements and OWS around them allowed
    range-spec   = first-pos "-" [ last-pos ]     ; int-range
                 / "-" suffix-length              ; suffix-range
    first-pos, last-pos, suffix-length = 1*DIGIT  ; ASCII digits only
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from .._model import ByteRange, RangeKind

__all__ = [
    "MAX_HEADER_LENGTH",
    "MAX_RANGES",
    "RangeParse",
    "Satisfiable",
    "Unsatisfiable",
    "WholeObject",
    "coalesce",
    "content_range",
    "first_range",
    "parse_range",
]

MAX_RANGES = 16
"""More range specs than this and the header is ignored.

Many small or overlapping ranges turn one request into a costly multipart response
(RFC 9110 §14.2 lets a server ignore such a header); no legitimate client needs more.
"""

MAX_HEADER_LENGTH = 4096
"""A longer ``Range`` header is ignored without looking at it."""

_BYTES_UNIT = "bytes"
# The form nearly every client sends (one range, both or the first position given), in
# one C call; anything else takes the general parser. 18 digits stay below 2**63.
_SIMPLE_RANGE = re.compile(r"bytes=([0-9]{1,18})-([0-9]{0,18})")
_OWS = " \t"
# Enum members bound once (why: _model.py, next to RangeKind).
_BOUNDED, _OPEN = RangeKind.BOUNDED, RangeKind.OPEN
_ASCII_DIGITS = frozenset("0123456789")


@dataclass(frozen=True, slots=True)
class WholeObject:
    """No Range header, an unknown unit, or a syntactically invalid header: serve 200 with
    the whole object (RFC 9110: a server MAY ignore an invalid Range)."""


@dataclass(frozen=True, slots=True)
class Satisfiable:
    """Serve 206 with these ranges: in request order, each resolved against the size.

    ``kind`` tells the scheduler whether the range reveals where a download started:
    ``OPEN`` for ``X-``, ``BOUNDED`` for ``X-Y`` (even ``0-(size-1)``; the
    :class:`ByteRange` model decides what counts as a tail read), ``SUFFIX`` for ``-N``.
    """

    ranges: tuple[ByteRange, ...]

    def __post_init__(self) -> None:
        if not self.ranges:
            raise ValueError("a satisfiable Range needs at least one range")


@dataclass(frozen=True, slots=True)
class Unsatisfiable:
    """Valid syntax, but no range overlaps the object: answer 416 with ``content_range``."""

    size: int

    @property
    def content_range(self) -> str:
        """The ``Content-Range`` value of the 416 response (RFC 9110 §15.5.17)."""
        return f"bytes */{self.size}"


RangeParse = WholeObject | Satisfiable | Unsatisfiable

_WHOLE = WholeObject()


def parse_range(header: str | None, size: int) -> RangeParse:
    """Resolve a ``Range`` header value against an object of ``size`` bytes.

    Never raises for any header text. The header is ignored (:class:`WholeObject`) when
    it is missing, longer than :data:`MAX_HEADER_LENGTH`, not in the ``bytes`` unit,
    syntactically invalid (including an int-range whose last-pos is below its
    first-pos), without any range spec, or with more than :data:`MAX_RANGES` specs.
    A valid header whose specs all miss the object is :class:`Unsatisfiable`; that is
    always the case for an empty object, because a :class:`ByteRange` cannot be empty.

    A spec misses the object when its first-pos is at or beyond ``size`` or it is the
    suffix ``-0``; such specs are dropped and the rest served. A last-pos beyond the
    object is clamped to its last byte, and a suffix longer than the object selects
    all of it.
    """
    if size < 0:
        raise ValueError(f"size must be >= 0, got {size}")
    if header is None or len(header) > MAX_HEADER_LENGTH:
        return _WHOLE
    simple = _SIMPLE_RANGE.fullmatch(header)
    if simple is not None:
        first, last = simple.groups()
        found = _simple_range(first, last, size)
        return Satisfiable((found,)) if isinstance(found, ByteRange) else found
    return _parse_general(header, size)


def first_range(header: str, size: int) -> ByteRange | Unsatisfiable | None:
    """The first range :func:`parse_range` resolves, :class:`Unsatisfiable`, or ``None``
    where it answers :class:`WholeObject`.

    What a server that serves one range per response needs to know, built without the
    set of all ranges: the middleware asks this for every range of every session.
    """
    if size < 0:
        raise ValueError(f"size must be >= 0, got {size}")
    if len(header) > MAX_HEADER_LENGTH:
        return None
    simple = _SIMPLE_RANGE.fullmatch(header)
    if simple is not None:
        first, last = simple.groups()
        found = _simple_range(first, last, size)
        return None if isinstance(found, WholeObject) else found
    parsed = _parse_general(header, size)
    if isinstance(parsed, Satisfiable):
        return parsed.ranges[0]
    return parsed if isinstance(parsed, Unsatisfiable) else None


def _simple_range(
    first_text: str, last_text: str, size: int
) -> ByteRange | Unsatisfiable | WholeObject:
    """``bytes=first-last`` or ``bytes=first-``, as :func:`_parse_general` reads them."""
    start = int(first_text)
    if last_text:
        last = int(last_text)
        if last < start:
            return _WHOLE
        if start >= size:
            return Unsatisfiable(size)
        return ByteRange(start, min(last, size - 1) + 1, _BOUNDED)
    if start >= size:
        return Unsatisfiable(size)
    return ByteRange(start, size, _OPEN)


def _parse_general(header: str, size: int) -> RangeParse:
    """Any ``Range`` value (``parse_range``'s rules), one spec at a time."""
    # The unit must be followed directly by "=": the grammar has no OWS there. Field
    # values never carry leading or trailing OWS, so trimming them loses nothing.
    unit, equals, range_set = header.strip(_OWS).partition("=")
    if not equals or not unit.isascii() or unit.lower() != _BYTES_UNIT:
        return _WHOLE

    ranges: list[ByteRange] = []
    specs = 0
    for element in range_set.split(","):
        spec = element.strip(_OWS)
        if not spec:
            continue  # empty list elements are allowed (RFC 9110 §5.6.1)
        specs += 1
        if specs > MAX_RANGES:
            return _WHOLE
        first, dash, last = spec.partition("-")
        if not dash or not _is_digits(first) or not _is_digits(last):
            return _WHOLE
        if first:
            if last and _greater(first, last):
                return _WHOLE  # an int-range with last-pos < first-pos is invalid
            start = _clamped(first, size)
            if start >= size:
                continue
            if last:
                ranges.append(ByteRange(start, _clamped(last, size - 1) + 1, RangeKind.BOUNDED))
            else:
                ranges.append(ByteRange(start, size, RangeKind.OPEN))
        elif last:
            length = _clamped(last, size)
            if length > 0:
                ranges.append(ByteRange(size - length, size, RangeKind.SUFFIX))
        else:
            return _WHOLE  # a lone "-"
    if specs == 0:
        return _WHOLE
    if not ranges:
        return Unsatisfiable(size)
    return Satisfiable(tuple(ranges))


def content_range(byte_range: ByteRange, size: int) -> str:
    """The ``Content-Range`` value of a 206 part: ``bytes first-last/size`` (inclusive)."""
    if byte_range.end > size:
        raise ValueError(f"range [{byte_range.start}, {byte_range.end}) exceeds size {size}")
    return f"bytes {byte_range.start}-{byte_range.end - 1}/{size}"


def coalesce(ranges: Sequence[ByteRange]) -> tuple[ByteRange, ...]:
    """Sort ``ranges`` and merge those that overlap or touch, for a multipart response.

    RFC 9110 §14.2 lets a server coalesce ranges so that a client asking for many small
    or overlapping pieces does not get the same bytes twice. A range that absorbed no
    other keeps its kind; a merged one is ``BOUNDED``, since it no longer corresponds to
    any one spec of the request.
    """
    result: list[ByteRange] = []
    for current in sorted(ranges, key=lambda r: (r.start, r.end)):
        if result and current.start <= result[-1].end:
            previous = result[-1]
            end = max(previous.end, current.end)
            result[-1] = ByteRange(previous.start, end, RangeKind.BOUNDED)
        else:
            result.append(current)
    return tuple(result)


def _is_digits(text: str) -> bool:
    """True when ``text`` is empty or ASCII digits only (``str.isdigit`` accepts "²", "٣")."""
    return _ASCII_DIGITS.issuperset(text)


def _clamped(digits: str, limit: int) -> int:
    """``min(int(digits), limit)`` for ASCII ``digits``, without converting a long string.

    After dropping leading zeros, a number with more digits than ``limit`` is larger than
    it; so ``int`` only ever sees as many digits as ``limit`` has (at most 20 for any
    size below 10**20), and the cost stays linear in the header.
    """
    significant = digits.lstrip("0")
    if not significant:
        return 0
    if len(significant) > len(str(limit)):
        return limit
    return min(int(significant), limit)


def _greater(left: str, right: str) -> bool:
    """``int(left) > int(right)`` for ASCII digit strings of any length, in linear time."""
    left = left.lstrip("0")
    right = right.lstrip("0")
    return (len(left), left) > (len(right), right)
