"""The policy's request rules: download ids, which objects are sessions, R-SESS-8."""

from __future__ import annotations

import pytest

from arkvory_sched import ByteRange, InvalidRequestError, RangeKind, SchedulerSettings, Strategy
from arkvory_sched.policy import sets_start, uses_sessions, validated_download_id

MIB = 1024 * 1024
SIZE = 100


def test_a_download_id_is_one_to_128_printable_characters() -> None:
    assert validated_download_id(None) is None
    assert validated_download_id("a.b:c~d+e/f=g-h_1") == "a.b:c~d+e/f=g-h_1"
    for bad in ("", "x" * 129, "has space", "ünï"):
        with pytest.raises(InvalidRequestError):
            validated_download_id(bad)


def test_only_large_objects_outside_shared_are_sessions() -> None:
    settings = SchedulerSettings()
    above = settings.session_min_bytes + 1
    assert uses_sessions(settings.admission_rules, above)
    assert not uses_sessions(settings.admission_rules, settings.session_min_bytes)
    assert not uses_sessions(settings.with_changes(strategy=Strategy.SHARED).admission_rules, above)


def test_tail_reads_do_not_set_the_start() -> None:
    assert not sets_start(None, SIZE, None)
    assert not sets_start(ByteRange(90, 100, RangeKind.BOUNDED), SIZE, None)
    assert not sets_start(ByteRange(90, 100, RangeKind.SUFFIX), SIZE, None)
    assert sets_start(ByteRange(0, 10, RangeKind.BOUNDED), SIZE, None)
    assert sets_start(ByteRange(40, 100, RangeKind.OPEN), SIZE, (90, 100))


def test_a_read_walking_back_from_a_delivered_tail_does_not_set_the_start() -> None:
    assert not sets_start(ByteRange(70, 90, RangeKind.BOUNDED), SIZE, (90, 100))
    assert sets_start(ByteRange(40, 60, RangeKind.BOUNDED), SIZE, (90, 100))
    assert sets_start(ByteRange(0, 90, RangeKind.BOUNDED), SIZE, (90, 100))
    assert sets_start(ByteRange(70, 90, RangeKind.BOUNDED), SIZE, (80, 95))
