"""Rules on one request and one session's ranges: the id, the admission, the start.

R-CLIENT-6 (download ids), R-SESS-3 and R-STRAT-4 (which objects are sessions) and
R-SESS-8 (which ranges tell where a download started).
"""

from __future__ import annotations

import re

from .._exceptions import InvalidRequestError
from .._model import ByteRange, RangeKind
from .._session_keys import MAX_DOWNLOAD_ID_LENGTH
from .._settings import SchedulerSettings, Strategy

__all__ = ["sets_start", "uses_sessions", "validated_download_id"]

_DOWNLOAD_ID = re.compile(r"[A-Za-z0-9._:~+/=-]+")
_BOUNDED = RangeKind.BOUNDED
_SHARED = Strategy.SHARED


def validated_download_id(value: str | None) -> str | None:
    """R-CLIENT-6 ids are client-made; bound them and refuse anything unprintable."""
    if value is None:
        return None
    if not value or len(value) > MAX_DOWNLOAD_ID_LENGTH or not _DOWNLOAD_ID.fullmatch(value):
        raise InvalidRequestError(
            "download_id",
            f"Arkvory-Download-Id must be 1..{MAX_DOWNLOAD_ID_LENGTH} characters of "
            "letters, digits and ._:~+/=-",
        )
    return value


def uses_sessions(settings: SchedulerSettings, size: int) -> bool:
    """Whether an object of ``size`` is admitted as a download session (R-SESS-3): not
    under ``shared``, and only above the session threshold."""
    return settings.strategy is not _SHARED and size > settings.session_min_bytes


def sets_start(
    byte_range: ByteRange | None, object_size: int, delivered_last: tuple[int, int] | None
) -> bool:
    """Whether a range tells where the download started (R-SESS-8).

    Tail reads do not; neither does a bounded read that reaches an already delivered
    tail (``delivered_last``, the last delivered interval) — a ZIP reader walking back
    from the end of the file towards its central directory in small exact reads is
    still reading the tail. The PostgreSQL store evaluates the second half inside
    ``record_delivery``, where the delivered ranges are (ADR 0016).
    """
    if byte_range is None or byte_range.is_tail_read(object_size):
        return False
    if byte_range.kind is not _BOUNDED:
        return True
    if delivered_last is None or delivered_last[1] < object_size:
        return True
    return byte_range.end < delivered_last[0] or byte_range.start == 0
