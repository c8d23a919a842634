"""Rules on one request and one session's ranges: the plan, the id, the start.

One request is decided once, here, for every admission path of every store: its
download id (R-CLIENT-6), its class (R-CLASS-2, R-CLASS-6), whether it is admitted
per session or per request (R-SESS-3, R-STRAT-4) and, for a newcomer, the arrival its
queue ticket keeps (R-RES-5). R-SESS-8 says which ranges tell where a download started.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import StrEnum
from typing import NamedTuple

from .._classes import DownloadClass, PrincipalKind, applied_class, default_class
from .._exceptions import InvalidRequestError
from .._model import ByteRange, DownloadRequest, RangeKind
from .._session_keys import MAX_DOWNLOAD_ID_LENGTH

__all__ = [
    "AdmissionRules",
    "RequestPlan",
    "Strategy",
    "base_class_of",
    "plan_of",
    "plan_request",
    "sets_start",
    "ticket_arrival",
    "uses_sessions",
    "validated_download_id",
]


class Strategy(StrEnum):
    """How waiting downloads are ordered (R-STRAT); switchable at run time."""

    ORDERED = "ordered"
    SMALLEST_FIRST = "smallest-first"
    SHARED = "shared"


class AdmissionRules(NamedTuple):
    """What planning a request reads of the settings, as plain values.

    The settings build it once per change (``SchedulerSettings.admission_rules``), so
    a request costs no lookups through the settings object.
    """

    strategy: Strategy
    session_min_bytes: int
    #: Operator-set base classes by principal (R-CLASS-6): service accounts and links.
    listed_classes: Mapping[str, DownloadClass]


class RequestPlan(NamedTuple):
    """How one GET is admitted, decided once before any store looks at its queue.

    A tuple, not a dataclass: it is made on every request, the fast path included.
    """

    #: The client's download id, checked (R-CLIENT-6); ``None`` for a tool without one.
    download_id: str | None
    #: The class before a header lowers it (R-CLASS-6).
    base_class: DownloadClass
    #: The class the request is admitted in (a header may only lower it).
    download_class: DownloadClass
    #: Admitted as a download session (``True``) or per request (R-SESS-3, R-STRAT-4).
    per_session: bool


_DOWNLOAD_ID = re.compile(r"[A-Za-z0-9._:~+/=-]+")
_BOUNDED = RangeKind.BOUNDED
_SHARED = Strategy.SHARED
_PERSON = PrincipalKind.PERSON


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


def uses_sessions(rules: AdmissionRules, size: int) -> bool:
    """Whether an object of ``size`` is admitted as a download session (R-SESS-3): not
    under ``shared``, and only above the session threshold."""
    return rules.strategy is not _SHARED and size > rules.session_min_bytes


def base_class_of(
    rules: AdmissionRules, principal: str, kind: PrincipalKind, given: DownloadClass | None
) -> DownloadClass:
    """The class a principal is admitted in before any header lowers it (R-CLASS-6).

    A service account or link the operator listed gets the listed class; otherwise
    the class the host's resolver gave, or the default of its kind (R-CLASS-2).
    People are never listed: their class is the host's business.
    """
    if kind is not _PERSON:
        listed = rules.listed_classes.get(principal)
        if listed is not None:
            return listed
    return given or default_class(kind)


def plan_request(
    rules: AdmissionRules,
    principal: str,
    kind: PrincipalKind,
    given_class: DownloadClass | None,
    requested_class: str | None,
    download_id: str | None,
    object_size: int,
) -> RequestPlan:
    """Decide how one GET is admitted; the one place every admission path asks.

    Raises :class:`InvalidRequestError` naming the field for a malformed download id
    or an unknown requested class, before any store has counted the request.
    """
    checked_id = validated_download_id(download_id)
    base = base_class_of(rules, principal, kind, given_class)
    cls = base if requested_class is None else applied_class(base, requested_class)
    return RequestPlan(checked_id, base, cls, uses_sessions(rules, object_size))


def plan_of(rules: AdmissionRules, request: DownloadRequest) -> RequestPlan:
    """:func:`plan_request` for a whole :class:`DownloadRequest`."""
    return plan_request(
        rules,
        request.principal,
        request.principal_kind,
        request.base_class,
        request.requested_class,
        request.download_id,
        request.object_size,
    )


def ticket_arrival(signed_ms: int | None, now: float, now_ms: int) -> tuple[float, int]:
    """The arrival a newcomer keeps: its ticket's, when it carries a valid one (R-RES-5).

    ``signed_ms`` is the arrival a verified ticket for this session signed (wall
    milliseconds), or ``None``. A ticket from the future (a wall clock stepped back)
    keeps nothing. Returns the arrival on the queue's monotonic clock and in wall
    milliseconds: the ticket's age is carried over from one to the other.
    """
    if signed_ms is None or signed_ms > now_ms:
        return now, now_ms
    return now - (now_ms - signed_ms) / 1000.0, signed_ms


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
