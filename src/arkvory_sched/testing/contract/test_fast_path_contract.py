"""The port's optional ``FastPath``, run against every implementation.

An implementation either declines it (``fast_path()`` is ``None``: every request goes
through ``admit``, and the tests below that need it are skipped with that reason) or
offers it, and then each of its decisions must be the one ``admit``/``report``/
``progress`` would make: a small object takes a per-request place and gives it back, a
further range of an active session passes with the session's ticket, the counters return
to zero, a freed place wakes a waiter, and everything ``admit`` must decide gets ``None``.
Where a test compares with the port, it runs the same steps on a second scheduler of the
same implementation through ``admit`` and ``report`` and requires the same ``stats()``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import anyio
import pytest

from arkvory_sched import (
    Admitted,
    Delivered,
    DownloadClass,
    DownloadRequest,
    DownloadScheduler,
    FastGrant,
    FastPath,
    Interrupted,
    InvalidRequestError,
    Rejected,
    RejectReason,
    Strategy,
)
from arkvory_sched.testing import MakeScheduler, contract_settings

from ._requests import BIG, SMALL, admitted, big, chunk, small

pytestmark = pytest.mark.anyio


def offered(scheduler: DownloadScheduler) -> FastPath[Any]:
    """The scheduler's fast path; the test does not apply to one that declines it."""
    fast = scheduler.fast_path()
    if fast is None:
        pytest.skip(f"{type(scheduler).__name__} declines the optional FastPath")
    return fast


def take(fast: FastPath[Any], request: DownloadRequest) -> FastGrant | None:
    """``admit_now`` with the fields of ``request``, as the middleware calls it."""
    handle: FastGrant | None = fast.admit_now(
        request.principal,
        request.principal_kind,
        request.base_class,
        request.requested_class,
        request.download_id,
        request.object_id,
        request.object_size,
        request.client_address,
        request.byte_range,
    )
    return handle


async def counters(scheduler: DownloadScheduler) -> tuple[Any, ...]:
    """What ``stats()`` says about admissions, places and bytes."""
    stats = await scheduler.stats()
    return (
        stats.admitted_total,
        stats.request_active,
        stats.request_waiting,
        stats.active,
        stats.waiting,
        stats.completed_total,
        dict(stats.rejections_total),
        {cls: per.bytes_delivered for cls, per in stats.per_class.items()},
    )


async def test_an_implementation_offers_the_fast_path_or_declines_it(
    scheduler: DownloadScheduler,
) -> None:
    fast = scheduler.fast_path()
    assert fast is None or isinstance(fast, FastPath)
    assert scheduler.fast_path() is fast  # asked once per scheduler: the answer holds


async def test_a_small_object_takes_a_place_and_counts_as_admit_does(
    make_scheduler: MakeScheduler,
) -> None:
    scheduler, port = await make_scheduler(), await make_scheduler()
    fast = offered(scheduler)
    place = take(fast, small())
    assert place is not None
    assert place.per_request
    assert place.download_class is DownloadClass.RELEASE  # a service account's default
    assert place.ticket is None
    assert (await scheduler.stats()).request_active == 1
    fast.progress_now(place, 1000)
    fast.release_per_request(place, SMALL)
    fast.release_per_request(place, SMALL)  # a second end is a no-op

    through_port = await admitted(port, small())
    assert through_port.admission == "per-request"
    await port.progress(through_port.grant, 1000)
    await port.report(through_port.grant, Delivered(None))
    await port.report(through_port.grant, Delivered(None))
    # Delivered without a range counts the whole object, as release_per_request(SMALL).
    seen = await counters(scheduler)
    assert seen == await counters(port)
    assert seen[1] == 0  # the place is back (R-RES-3)
    assert seen[7][DownloadClass.RELEASE] == SMALL  # progress counted once


async def test_places_run_out_as_through_admit_and_a_freed_place_wakes_a_waiter(
    make_scheduler: MakeScheduler,
) -> None:
    scheduler = await make_scheduler(
        contract_settings(max_downloads=2, transfer_queue_wait_seconds=5.0)
    )
    fast = offered(scheduler)
    first, second = take(fast, small("alpha")), take(fast, small("beta"))
    assert first is not None and second is not None
    assert take(fast, small("gamma")) is None  # no place free: admit queues it
    woken: list[Any] = []
    async with anyio.create_task_group() as tasks:

        async def wait_for_place() -> None:
            woken.append(await scheduler.admit(small("gamma")))

        tasks.start_soon(wait_for_place)
        with anyio.fail_after(2):
            while (await scheduler.stats()).request_waiting != 1:
                await anyio.sleep(0.005)
        fast.release_per_request(first, 0)
        with anyio.fail_after(2):
            while not woken:
                await anyio.sleep(0.005)
    (decision,) = woken
    assert isinstance(decision, Admitted)
    assert decision.admission == "per-request"
    fast.release_per_request(second, SMALL)
    await scheduler.report(decision.grant, Interrupted())
    stats = await scheduler.stats()
    assert (stats.request_active, stats.request_waiting, stats.admitted_total) == (0, 0, 3)


async def test_a_further_range_of_an_active_session_passes_as_admit_would_pass_it(
    make_scheduler: MakeScheduler,
) -> None:
    settings = contract_settings(sessions=1, ranges_per_session=2)
    scheduler, port = await make_scheduler(settings), await make_scheduler(settings)
    fast = offered(scheduler)
    first = await admitted(scheduler, big(byte_range=chunk(0)))
    port_first = await admitted(port, big(byte_range=chunk(0)))
    handle = take(fast, big(byte_range=chunk(1)))
    port_second = await admitted(port, big(byte_range=chunk(1)))
    assert handle is not None
    assert not handle.per_request
    assert handle.byte_range == port_second.grant.byte_range == chunk(1)
    assert handle.download_class is port_second.download_class
    assert handle.ticket is not None and port_second.ticket is not None
    # R-SESS-11: the session has two ranges in flight; admit answers the third.
    assert take(fast, big(byte_range=chunk(2))) is None
    refused = await scheduler.admit(big(byte_range=chunk(2)))
    assert isinstance(refused, Rejected)
    assert refused.reason is RejectReason.RANGES_PER_SESSION
    await port.admit(big(byte_range=chunk(2)))
    assert await counters(scheduler) == await counters(port)

    fast.report_range(handle, Delivered(chunk(1)))
    fast.report_range(handle, Delivered(chunk(1)))  # a second end is a no-op
    await port.report(port_second.grant, Delivered(chunk(1)))
    for scheduler_, decision in ((scheduler, first), (port, port_first)):
        await scheduler_.report(decision.grant, Delivered(chunk(0)))
    rest = [take(fast, big(byte_range=chunk(index))) for index in (2, 3)]
    for index, grant in zip((2, 3), rest, strict=True):
        assert grant is not None
        fast.report_range(grant, Delivered(chunk(index)))
    last = take(fast, big(byte_range=chunk(4)))
    assert last is not None
    fast.report_range(last, Delivered(chunk(4)))
    for index in (2, 3, 4):
        decision = await admitted(port, big(byte_range=chunk(index)))
        await port.report(decision.grant, Delivered(chunk(index)))
    seen = await counters(scheduler)
    assert seen == await counters(port)
    assert (seen[3], seen[5]) == (0, 1)  # complete: the slot is free again
    assert seen[7][DownloadClass.RELEASE] == BIG


async def test_none_whenever_admit_must_decide(make_scheduler: MakeScheduler) -> None:
    scheduler = await make_scheduler(contract_settings(sessions=1, max_downloads=1))
    fast = offered(scheduler)
    before = await counters(scheduler)
    assert take(fast, big()) is None  # a new download session: admit starts or queues it
    assert await counters(scheduler) == before  # and nothing was taken or stored
    holder = await admitted(scheduler, big("holder", "dl-h", byte_range=chunk(0)))
    assert take(fast, big("holder", "dl-other")) is None  # another download of it
    assert take(fast, big("alpha", "dl-a")) is None  # someone else's: admit queues it
    place = take(fast, small())
    assert place is not None
    assert take(fast, small("beta")) is None  # no place free
    fast.release_per_request(place, 0)
    await scheduler.close()
    assert take(fast, small()) is None  # admit answers shutting down
    # R-RES-4: an active session may finish; admit decides its ranges after close.
    assert take(fast, big("holder", "dl-h", byte_range=chunk(1))) is None
    await scheduler.report(holder.grant, Interrupted())
    stats = await scheduler.stats()
    assert (stats.request_active, stats.active) == (0, 1)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"download_id": "bad id"}, "download_id"),
        ({"download_id": "x" * 200}, "download_id"),
        ({"requested_class": "turbo"}, "download_class"),
    ],
)
async def test_the_fast_path_refuses_what_admit_refuses(
    make_scheduler: MakeScheduler, changes: dict[str, Any], field: str
) -> None:
    scheduler = await make_scheduler()
    fast = offered(scheduler)
    request = replace(small(), **changes)
    with pytest.raises(InvalidRequestError) as through_port:
        await scheduler.admit(request)
    with pytest.raises(InvalidRequestError) as at_once:
        take(fast, request)
    assert at_once.value.field == through_port.value.field == field
    stats = await scheduler.stats()
    assert (stats.request_active, stats.admitted_total) == (0, 0)


async def test_a_bad_class_on_a_further_range_is_refused_as_admit_refuses_it(
    make_scheduler: MakeScheduler,
) -> None:
    scheduler = await make_scheduler()
    fast = offered(scheduler)
    first = await admitted(scheduler, big(byte_range=chunk(0)))
    with pytest.raises(InvalidRequestError) as raised:
        take(fast, big(byte_range=chunk(1), requested_class="turbo"))
    assert raised.value.field == "download_class"
    await scheduler.report(first.grant, Interrupted())


async def test_an_active_session_keeps_its_ranges_after_a_switch_to_shared(
    make_scheduler: MakeScheduler,
) -> None:
    """R-STRAT-4: after the switch a request of the active session is still the
    session's — never a per-request place of the fast path."""
    scheduler = await make_scheduler()
    fast = offered(scheduler)
    first = await admitted(scheduler, big(byte_range=chunk(0)))
    await scheduler.configure(scheduler.settings.with_changes(strategy=Strategy.SHARED))
    handle = take(fast, big(byte_range=chunk(1)))
    assert handle is None or not handle.per_request
    if handle is None:
        second = await admitted(scheduler, big(byte_range=chunk(1)))
        assert second.admission == "session"
        await scheduler.report(second.grant, Interrupted())
    else:
        fast.report_range(handle, Interrupted())
    other = take(fast, big("beta", "dl-b"))  # a new download goes per request now
    assert other is not None and other.per_request
    assert other.byte_range is None
    fast.release_per_request(other, BIG)
    await scheduler.report(first.grant, Interrupted())
    stats = await scheduler.stats()
    assert (stats.request_active, stats.active) == (0, 1)


async def test_a_place_of_a_lowered_class_is_served_in_that_class(
    make_scheduler: MakeScheduler,
) -> None:
    scheduler = await make_scheduler()
    fast = offered(scheduler)
    place = take(fast, small(requested_class="bulk", download_id="dl-7"))
    assert place is not None
    assert place.download_class is DownloadClass.BULK
    fast.release_per_request(place, 10)
    per_class = (await scheduler.stats()).per_class
    assert per_class[DownloadClass.BULK].bytes_delivered == 10


async def test_per_request_and_session_grants_never_share_a_token(
    make_scheduler: MakeScheduler,
) -> None:
    """Not a fast-path rule, but the one the per-request component must keep with its
    store: a caller (the simulation) keys its records by ``Grant.token``."""
    scheduler = await make_scheduler(contract_settings(max_downloads=4))
    grants = [(await admitted(scheduler, small(f"p{index}"))).grant for index in range(3)]
    grants += [(await admitted(scheduler, big(byte_range=chunk(0)))).grant]
    grants += [(await admitted(scheduler, big(byte_range=chunk(1)))).grant]
    assert {grant.admission for grant in grants} == {"per-request", "session"}
    assert len({grant.token for grant in grants}) == len(grants)
    for grant in grants:
        await scheduler.report(grant, Interrupted())
    stats = await scheduler.stats()
    assert (stats.request_active, stats.active) == (0, 1)
