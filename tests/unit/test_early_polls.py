"""The per-process memory of early polls (issue #26, ADR 0029): which polls it answers,
and that it stays bounded however many keys poll."""

from __future__ import annotations

import pytest

from arkvory_sched import DownloadClass, Queued
from arkvory_sched._early_polls import EarlyPolls
from arkvory_sched.policy import early_poll


def answer(ticket: str = "t-1", retry_after: int = 60) -> Queued:
    return Queued(
        position=3,
        starts_at=1_000.0,
        starts_earliest=990.0,
        starts_latest=1_010.0,
        check_at=960.0,
        retry_after=retry_after,
        download_class=DownloadClass.RELEASE,
        ticket=ticket,
    )


def test_the_tolerance_is_a_quarter_second_or_a_twentieth_of_the_delay() -> None:
    assert early_poll(now=0.74, check_at=1.0, delay=1.0)  # the head, asked back in 1 s
    assert not early_poll(now=0.75, check_at=1.0, delay=1.0)
    assert early_poll(now=9.4, check_at=10.0, delay=10.0)
    assert not early_poll(now=9.5, check_at=10.0, delay=10.0)
    assert early_poll(now=284.9, check_at=300.0, delay=300.0)
    assert not early_poll(now=285.0, check_at=300.0, delay=300.0)


def test_an_early_poll_gets_the_answer_with_the_seconds_left() -> None:
    polls = EarlyPolls()
    polls.remember(b"k", answer(), check_at=160.0, delay=60.0)
    again = polls.answer(b"k", "t-1", now=110.2, wall_offset=800.0)
    assert again == answer(retry_after=50)
    assert (
        polls.answer(b"k", None, now=110.2, wall_offset=800.0) == again
    )  # a client that keeps no ticket
    assert (
        polls.answer(b"k", "t-0", now=110.2, wall_offset=800.0) is None
    )  # another ticket: the store decides
    assert polls.answer(b"k", "t-1", now=157.0, wall_offset=800.0) is None  # due: the store decides
    assert polls.answer(b"other", None, now=110.2, wall_offset=800.0) is None
    assert polls.answered == 2
    jumped = polls.answer(b"k", "t-1", now=110.2, wall_offset=800.0 + 3600.0)
    assert jumped is not None and jumped.check_at == 960.0 + 3600.0  # the clock jumped
    assert jumped.starts_at == 1_000.0 + 3600.0 and jumped.retry_after == 50
    polls.forget(b"k")
    assert polls.answer(b"k", "t-1", now=110.2, wall_offset=800.0) is None


def test_memory_is_bounded_by_the_capacity_the_oldest_forgotten_first() -> None:
    polls = EarlyPolls(capacity=1_000)
    for number in range(50_000):
        polls.remember(number.to_bytes(4, "big"), answer(), check_at=160.0, delay=60.0)
    assert len(polls) == 1_000
    assert polls.answer((0).to_bytes(4, "big"), None, now=110.0, wall_offset=800.0) is None
    assert polls.answer((49_999).to_bytes(4, "big"), None, now=110.0, wall_offset=800.0) is not None
    polls.clear()
    assert len(polls) == 0
    with pytest.raises(ValueError):
        EarlyPolls(capacity=0)
