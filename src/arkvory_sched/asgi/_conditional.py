"""Conditional-request validators (RFC 9110 §13) shared by the middleware and the demo
file server, so the middleware predicts a ``304`` exactly as the server decides it."""

from __future__ import annotations

from datetime import UTC
from email.utils import parsedate_to_datetime

__all__ = ["etag_listed", "http_date"]


def etag_listed(header: str, etag: str, *, weak: bool) -> bool:
    """Whether an ``If-None-Match``/``If-Match`` list names ``etag`` (or is ``*``)."""
    wanted = etag.removeprefix("W/") if weak else etag
    for candidate in header.split(","):
        tag = candidate.strip()
        if tag == "*":
            return True
        if (tag.removeprefix("W/") if weak else tag) == wanted:
            return True
    return False


def http_date(text: str) -> int | None:
    """An HTTP-date as epoch seconds (its own resolution), or ``None`` when it is not one."""
    try:
        moment = parsedate_to_datetime(text.strip())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.astimezone(UTC).timestamp())
