"""``downloads_of()`` on every implementation: a person's own downloads (issue #19).

A principal sees each of its waiting and active downloads with the place and start its
own client's next poll is told, a start told on a guessed rate shown as one (ADR 0042),
and never anything of another principal's.
"""

from __future__ import annotations

import pytest

from arkvory_sched import (
    ByteRange,
    Delivered,
    DownloadClass,
    DownloadRequest,
    DownloadScheduler,
    DownloadState,
    OwnDownload,
    PrincipalKind,
    Queued,
)
from arkvory_sched.testing import FakeClock, MakeScheduler, contract_settings

from ._requests import (
    BIG,
    MIB,
    RANGE,
    admitted,
    big,
    chunk,
    deliver,
    four_busy_seconds,
    queued,
    serve_next,
)

pytestmark = pytest.mark.anyio

PERSON = PrincipalKind.PERSON


def ann(
    download_id: str,
    object_id: str,
    *,
    kind: PrincipalKind = PERSON,
    requested_class: str | None = None,
    size: int = BIG,
    byte_range: ByteRange | None = None,
) -> DownloadRequest:
    """A download of ``ann``, a person by default (so interactive, R-CLASS-2)."""
    return big(
        "ann",
        download_id,
        kind=kind,
        object_id=object_id,
        requested_class=requested_class,
        size=size,
        byte_range=byte_range,
    )


async def poll(scheduler: DownloadScheduler, request: DownloadRequest) -> Queued:
    """A waiting client's next request: still queued, with its place."""
    answer = await queued(scheduler, request)
    assert answer.position is not None
    return answer


def by_object(downloads: tuple[OwnDownload, ...]) -> dict[str, OwnDownload]:
    return {download.object_id: download for download in downloads}


async def test_a_principal_sees_exactly_its_own_waiting_and_active_downloads(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """Two slots: one held by ann, one by ci-bot; ann and two others wait. Ann's answer
    holds her active download and her two waiting ones, with the places and starts her
    polls are told, and nothing of ci-bot's, bob's or eve's."""
    scheduler = await make_scheduler(contract_settings(sessions=2, per_principal=2))
    started_wall = clock.wall()
    active = await admitted(scheduler, ann("dl-a", "isos/a.iso", byte_range=chunk(0)))
    await admitted(scheduler, big("ci-bot", "dl-bot", object_id="bot/secret.iso"))
    clock.advance(4.0)
    await scheduler.report(active.grant, Delivered(chunk(0)))
    await queued(scheduler, big("bob", "dl-bob", object_id="bob/private.iso"))
    waiting_b = ann("dl-b", "isos/b.iso", requested_class="bulk")
    waiting_c = ann("dl-c", "isos/c.iso", size=2 * BIG)
    await queued(scheduler, waiting_b)
    await queued(scheduler, big("eve", "dl-eve", object_id="eve/private.iso"))
    await queued(scheduler, waiting_c)
    clock.advance(1.0)
    await scheduler.tick()
    polled_b = await poll(scheduler, waiting_b)
    polled_c = await poll(scheduler, waiting_c)

    mine = await scheduler.downloads_of("ann")

    assert mine.principal == "ann"
    assert mine.at == pytest.approx(clock.wall())
    assert mine.total == 3 and not mine.truncated
    assert [d.object_id for d in mine.downloads] == ["isos/a.iso", "isos/b.iso", "isos/c.iso"]
    seen = by_object(mine.downloads)
    a, b, c = seen["isos/a.iso"], seen["isos/b.iso"], seen["isos/c.iso"]
    assert (a.state, a.download_id, a.download_class) == (
        DownloadState.ACTIVE,
        "dl-a",
        DownloadClass.INTERACTIVE,
    )
    assert (a.position, a.starts_at, a.starts_earliest, a.starts_latest) == (None,) * 4
    assert a.bytes_delivered == RANGE and a.bytes_remaining == BIG - RANGE
    assert a.object_size == BIG
    assert a.rate == pytest.approx(RANGE / 5.0, rel=0.05)
    assert a.since == pytest.approx(started_wall, abs=1.0)

    assert (b.state, b.download_id) == (DownloadState.WAITING, "dl-b")
    assert (b.download_class, b.queue_class) == (DownloadClass.BULK, DownloadClass.BULK)
    assert (c.download_class, c.object_size) == (DownloadClass.INTERACTIVE, 2 * BIG)
    for shown, polled in ((b, polled_b), (c, polled_c)):
        assert shown.position == polled.position
        assert shown.starts_at == pytest.approx(polled.starts_at, abs=0.01)
        assert shown.starts_earliest == pytest.approx(polled.starts_earliest, abs=0.01)
        assert shown.starts_latest == pytest.approx(polled.starts_latest, abs=0.01)
        assert shown.rate is None and shown.bytes_delivered == 0
        assert shown.since == pytest.approx(started_wall + 4.0, abs=1.0)
    assert {b.position, c.position} <= {1, 2, 3, 4} and b.position != c.position


async def test_another_principals_downloads_never_appear(make_scheduler: MakeScheduler) -> None:
    scheduler = await make_scheduler(contract_settings(sessions=1))
    await admitted(scheduler, big("bob", "dl-bob-1", object_id="bob/one.iso"))
    await queued(scheduler, big("bob", "dl-bob-2", object_id="bob/two.iso"))
    await queued(scheduler, ann("dl-ann", "ann/mine.iso"))

    nobody = await scheduler.downloads_of("mallory")
    assert (nobody.downloads, nobody.total, nobody.truncated) == ((), 0, False)

    mine = await scheduler.downloads_of("ann")
    assert [(d.object_id, d.download_id) for d in mine.downloads] == [("ann/mine.iso", "dl-ann")]
    assert "bob" not in repr(mine)

    bobs = await scheduler.downloads_of("bob")
    assert sorted(d.object_id for d in bobs.downloads) == ["bob/one.iso", "bob/two.iso"]
    assert "ann" not in repr(bobs)


async def test_positions_fall_as_the_queue_moves_and_a_completed_download_disappears(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """One slot, four waiters ahead of ann's download: each time the queue serves one,
    ann's place as shown falls, and is the place her poll is told; once served it is
    active, and once delivered it is gone from her list."""
    scheduler = await make_scheduler(contract_settings(sessions=1, per_principal=1))
    holder = await admitted(scheduler, big("holder", "dl-h", object_id="h.iso"))
    waiters = [big(f"p{index}", f"dl-{index}", object_id=f"o{index}.iso") for index in range(4)]
    for waiter in waiters:
        await queued(scheduler, waiter)
    mine = ann("dl-ann", "ann/mine.iso", kind=PrincipalKind.SERVICE)  # release, like the rest
    await queued(scheduler, mine)
    await deliver(scheduler, holder)
    waiters.append(mine)

    places: list[int] = []
    polled = await poll(scheduler, mine)  # a newcomer's next poll is decided at once
    while True:
        shown = (await scheduler.downloads_of("ann")).downloads
        assert len(shown) == 1 and shown[0].state is DownloadState.WAITING
        assert shown[0].position == polled.position
        assert shown[0].position is not None
        places.append(shown[0].position)
        # serve_next lets half a second pass: then it is time for ann's next poll.
        clock.advance(max(0.0, polled.check_at - clock.wall() - 0.5))
        served, grant = await serve_next(scheduler, clock, waiters, complete=False)
        if served is mine:
            break
        await deliver(scheduler, grant)
        polled = await poll(scheduler, mine)  # at her checkAt (ADR 0029): decided
    assert places == sorted(places, reverse=True) and len(set(places)) == len(places)
    assert places[0] >= 4 and places[-1] == 1

    # Ann's download holds the slot now; delivered, it disappears.
    shown = (await scheduler.downloads_of("ann")).downloads
    assert [d.state for d in shown] == [DownloadState.ACTIVE]
    await deliver(scheduler, grant)
    after = await scheduler.downloads_of("ann")
    assert (after.downloads, after.total) == ((), 0)


async def test_the_estimate_interval_contains_the_point(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    scheduler = await make_scheduler(contract_settings(sessions=1))
    await admitted(scheduler, big("holder", "dl-h", object_id="h.iso"))
    requests = [ann(f"dl-{index}", f"ann/{index}.iso") for index in range(3)]
    for request in requests:
        await queued(scheduler, request)
    clock.advance(1.0)
    await scheduler.tick()
    for request in requests:
        await poll(scheduler, request)
    shown = (await scheduler.downloads_of("ann")).downloads
    assert len(shown) == 3
    previous = clock.wall()
    for download in shown:
        assert download.state is DownloadState.WAITING
        assert download.starts_at is not None
        assert download.starts_earliest is not None and download.starts_latest is not None
        assert download.starts_earliest <= download.starts_at <= download.starts_latest
        assert download.starts_earliest < download.starts_latest
        assert download.starts_at >= previous  # later places start no earlier
        previous = download.starts_at


async def test_the_answer_is_capped_and_says_how_many_it_left_out(
    make_scheduler: MakeScheduler,
) -> None:
    scheduler = await make_scheduler(contract_settings(sessions=1))
    await admitted(scheduler, big("holder", "dl-h", object_id="h.iso"))
    for index in range(5):
        await queued(scheduler, ann(f"dl-{index}", f"ann/{index}.iso"))
    capped = await scheduler.downloads_of("ann", limit=2)
    assert [d.object_id for d in capped.downloads] == ["ann/0.iso", "ann/1.iso"]
    assert capped.total == 5 and capped.truncated


async def test_a_start_told_on_a_guessed_rate_is_shown_as_a_guess_until_the_rate_is_read(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """ADR 0042 on the page: nothing configured and nothing measured, ann's waiting
    download is shown with its start as a guess, as her poll is told; after a few busy
    seconds of her other download the rate is read, and neither the page nor the poll
    calls the start a guess. The download that holds a slot is never a guess."""
    link = 16 * MIB
    scheduler = await make_scheduler(contract_settings(sessions=1))
    holder = await admitted(scheduler, ann("dl-h", "isos/h.iso", size=10 * link))
    waiting = ann("dl-w", "isos/w.iso")
    await queued(scheduler, waiting)
    for _ in range(2):  # the GET has not reported a byte yet: nothing is measured
        clock.advance(1.0)
        await scheduler.tick()
    told = await poll(scheduler, waiting)
    seen = by_object((await scheduler.downloads_of("ann")).downloads)
    assert told.guessed
    assert seen["isos/w.iso"].state is DownloadState.WAITING
    assert seen["isos/w.iso"].starts_guessed
    assert seen["isos/h.iso"].state is DownloadState.ACTIVE
    assert not seen["isos/h.iso"].starts_guessed

    await four_busy_seconds(scheduler, clock, holder, link)
    told = await poll(scheduler, waiting)
    seen = by_object((await scheduler.downloads_of("ann")).downloads)
    assert not told.guessed
    assert not seen["isos/w.iso"].starts_guessed
    assert seen["isos/w.iso"].starts_at == pytest.approx(told.starts_at, abs=0.01)
    await scheduler.report(holder.grant, Delivered(None))


async def test_a_start_told_on_the_configured_rate_is_no_guess(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """With the link's rate configured, a cold server's first starts rest on it: nothing
    is measured yet, and ann's waiting download is not shown as a guess (ADR 0042)."""
    scheduler = await make_scheduler(contract_settings(sessions=1, bandwidth=1 * MIB))
    holder = await admitted(scheduler, big("curl", None, size=50 * MIB))  # 50 s of link
    waiting = ann("dl-w", "isos/w.iso")
    await queued(scheduler, waiting)
    clock.advance(2.0)
    await scheduler.tick()  # the GET has not reported a byte yet: nothing is measured
    told = await poll(scheduler, waiting)
    [shown] = (await scheduler.downloads_of("ann")).downloads
    assert not told.guessed
    assert shown.state is DownloadState.WAITING and not shown.starts_guessed
    assert shown.starts_at == pytest.approx(told.starts_at, abs=0.01)
    await scheduler.report(holder.grant, Delivered(None))
