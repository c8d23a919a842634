"""Reading a write request: its media type, a bounded body, JSON with positions.

A settings record is a few kilobytes at most, so the body is capped at
:data:`MAX_BODY_BYTES`. The cap is enforced while reading — a declared
``Content-Length`` over it is refused before reading, and a body that runs past it
(chunked, or lying about its length) is refused as soon as it does — so an oversized
or endless body never sits in memory. A syntax error is reported with its line and
column, and a member given twice is refused: JSON parsers disagree on which copy
wins, and an operator's record must mean one thing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Final

from starlette.requests import ClientDisconnect, Request

__all__ = [
    "MAX_BODY_BYTES",
    "BodyError",
    "is_json_media_type",
    "read_json_object",
    "whole_number",
]

MAX_BODY_BYTES: Final = 64 * 1024


class BodyError(Exception):
    """Why a body was refused: ``status`` 400 or 413, ``reason`` and ``detail`` for the
    problem document, ``position`` (line, column, character offset) for a syntax error."""

    def __init__(
        self, status: int, reason: str, detail: str, position: Mapping[str, int] | None = None
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.reason = reason
        self.detail = detail
        self.position = position


def is_json_media_type(content_type: str | None) -> bool:
    """``application/json``, with parameters (``; charset=utf-8``) allowed."""
    if not content_type:
        return False
    media, _, _ = content_type.partition(";")
    return media.strip().lower() == "application/json"


async def read_json_object(request: Request, limit: int = MAX_BODY_BYTES) -> dict[str, object]:
    """The body as a JSON object, or :class:`BodyError`."""
    declared = request.headers.get("content-length")
    if declared is not None and whole_number(declared) and int(declared) > limit:
        raise _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise _too_large(limit)
            chunks.append(chunk)
    except ClientDisconnect:
        raise BodyError(400, "incomplete_body", "The client went away mid-body.") from None
    raw = b"".join(chunks)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise BodyError(
            400,
            "malformed_json",
            f"The body is not UTF-8 (byte {error.start}).",
            {"offset": error.start},
        ) from None
    try:
        value = json.loads(
            text, object_pairs_hook=_refuse_duplicates, parse_constant=_refuse_constant
        )
    except json.JSONDecodeError as error:
        raise BodyError(
            400,
            "malformed_json",
            f"The body is not JSON: {error.msg} at line {error.lineno}, column {error.colno}.",
            {"line": error.lineno, "column": error.colno, "offset": error.pos},
        ) from None
    except _DuplicateMemberError as error:
        raise BodyError(
            400,
            "malformed_json",
            f"The member {error.name!r} is given twice; give each setting once.",
        ) from None
    except _ConstantError as error:
        raise BodyError(
            400, "malformed_json", f"{error.name} is not a JSON number (RFC 8259)."
        ) from None
    except RecursionError:
        raise BodyError(400, "malformed_json", "The body is nested too deeply.") from None
    if not isinstance(value, dict):
        raise BodyError(
            400,
            "malformed_json",
            "The body must be a JSON object: the settings record plus expectedRevision.",
        )
    return value


class _DuplicateMemberError(ValueError):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


class _ConstantError(ValueError):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def _refuse_constant(name: str) -> object:
    """``NaN`` and ``Infinity`` are Python's extensions, not JSON: refused."""
    raise _ConstantError(name)


def whole_number(text: str) -> bool:
    """ASCII digits only (``str.isdigit`` also takes ``²``, which ``int`` refuses)."""
    text = text.strip()
    return text.isascii() and text.isdigit()


def _refuse_duplicates(pairs: list[tuple[str, object]]) -> dict[str, object]:
    value: dict[str, object] = {}
    for name, item in pairs:
        if name in value:
            raise _DuplicateMemberError(name)
        value[name] = item
    return value


def _too_large(limit: int) -> BodyError:
    return BodyError(
        413,
        "body_too_large",
        f"The body is larger than {limit} bytes; a settings record is far smaller.",
    )
