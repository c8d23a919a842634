"""The RFC 9457 problem document of an error answer, and the message made from it.

A busy server explains itself in a problem document (its ``reason`` and ``retryAfter``
tell a queue from a failure, see :func:`~._policy.classify`), and a refusal's ``title``
and ``detail`` are what the user should read in :class:`HTTPStatusError`. Only the first
:data:`~._steps.PROBLEM_BODY_LIMIT` bytes are read: an error body is not a download.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ._steps import PROBLEM_BODY_LIMIT

__all__ = ["parse_problem", "status_message"]


def parse_problem(head: Mapping[str, str], body: bytes) -> dict[str, Any] | None:
    """The RFC 9457 problem document of an error body, if it is one."""
    content_type = head.get("content-type", "").split(";", 1)[0].strip().lower()
    if not (content_type == "application/problem+json" or content_type.endswith("/json")):
        return None
    try:
        document = json.loads(body[:PROBLEM_BODY_LIMIT])
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return document if isinstance(document, dict) else None


def status_message(status: int, problem: Mapping[str, Any] | None) -> str:
    """``the server answered 403: Forbidden — token expired``, or just the status."""
    if problem is None:
        return f"the server answered {status}"
    parts = [str(problem.get(key)) for key in ("title", "detail") if problem.get(key)]
    if not parts:
        return f"the server answered {status}"
    return f"the server answered {status}: " + " — ".join(parts)
