"""The answers the middleware writes itself: problem documents and queue headers (SPEC §16)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from arkvory_sched import DownloadClass, Queued, Rejected, RejectReason
from arkvory_sched.asgi._problems import (
    PROBLEM_CONTENT_TYPE,
    Answer,
    bad_request,
    busy,
    queued,
    rfc3339,
)

from ._helpers import queued_answer

WALL = 1_780_000_000.0  # 2026-05-28T20:26:40Z


def _parts(answer: Answer) -> tuple[int, dict[bytes, bytes], dict[str, Any]]:
    status, headers, body = answer
    names = [name for name, _ in headers]
    assert len(names) == len(set(names)), "a header appears twice"
    mapping = dict(headers)
    assert mapping[b"content-type"] == PROBLEM_CONTENT_TYPE
    assert mapping[b"content-length"] == str(len(body)).encode()
    assert mapping[b"cache-control"] == b"no-store"
    document = json.loads(body)
    assert isinstance(document, dict)
    assert document["status"] == status
    assert document["type"] == "urn:arkvory:problem:" + document["reason"]
    return status, mapping, document


def _queued(**changes: Any) -> Queued:
    return queued_answer(
        WALL, **{"download_class": DownloadClass.BULK, "ticket": "2.abc.abd.sig", **changes}
    )


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.0, "1970-01-01T00:00:00Z"),
        (1.6, "1970-01-01T00:00:02Z"),
        (WALL, "2026-05-28T20:26:40Z"),
    ],
)
def test_rfc3339_is_utc_with_whole_seconds(seconds: float, text: str) -> None:
    assert rfc3339(seconds) == text


def test_queued_is_a_503_with_every_queue_header() -> None:
    status, headers, document = _parts(queued(_queued()))
    assert status == 503
    assert headers[b"retry-after"] == b"300"
    assert headers[b"arkvory-starts-at"] == (
        b"2026-05-28T20:36:40Z; earliest=2026-05-28T20:35:40Z; latest=2026-05-28T20:37:40Z"
    )
    assert headers[b"arkvory-queue-position"] == b"3"
    assert headers[b"arkvory-queue-ticket"] == b"2.abc.abd.sig"
    assert headers[b"arkvory-download-class"] == b"bulk"
    assert document["reason"] == "download_queued"
    assert document["position"] == 3
    assert document["startsAt"] == "2026-05-28T20:36:40Z"
    assert document["startsEarliest"] == "2026-05-28T20:35:40Z"
    assert document["startsLatest"] == "2026-05-28T20:37:40Z"
    assert document["retryAfter"] == 300
    assert document["downloadClass"] == "bulk"
    assert document["startsGuessed"] is False


def test_a_start_on_a_guessed_rate_says_so_in_the_header_and_the_document() -> None:
    """ADR 0042: nothing configured, nothing measured, and the answer says so."""
    _, headers, document = _parts(queued(_queued(guessed=True)))
    assert headers[b"arkvory-starts-at"] == (
        b"2026-05-28T20:36:40Z; earliest=2026-05-28T20:35:40Z; latest=2026-05-28T20:37:40Z"
        b"; basis=guess"
    )
    assert document["startsGuessed"] is True


def test_newcomer_without_position_or_ticket_gets_neither_header() -> None:
    status, headers, document = _parts(queued(_queued(position=None, ticket=None)))
    assert status == 503
    assert b"arkvory-queue-position" not in headers
    assert b"arkvory-queue-ticket" not in headers
    assert document["position"] is None
    assert "a place" in document["detail"]


@pytest.mark.parametrize("reason", list(RejectReason))
def test_busy_is_a_503_naming_its_reason(reason: RejectReason) -> None:
    status, headers, document = _parts(busy(Rejected(reason, 7, DownloadClass.RELEASE)))
    assert status == 503
    assert headers[b"retry-after"] == b"7"
    assert headers[b"arkvory-download-class"] == b"release"
    assert document["reason"] == "busy"
    assert document["busyReason"] == reason.value
    assert document["retryAfter"] == 7
    assert document["detail"]


def test_busy_without_class_has_no_class_header() -> None:
    _, headers, _ = _parts(busy(Rejected(RejectReason.QUEUE_FULL, 2)))
    assert b"arkvory-download-class" not in headers


def test_bad_request_names_the_field() -> None:
    status, headers, document = _parts(
        bad_request("Arkvory-Download-Id", "Arkvory-Download-Id is malformed")
    )
    assert status == 400
    assert b"retry-after" not in headers
    assert document["reason"] == "invalid_request"
    assert document["field"] == "Arkvory-Download-Id"
    assert document["detail"] == "Arkvory-Download-Id is malformed"
