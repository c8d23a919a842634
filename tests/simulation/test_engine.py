"""The simulation's own parts, checked against figures worked out by hand: a crowd's
figures are only as true as the link, the idle meter and the clients behind them."""

from __future__ import annotations

import anyio
import pytest

from arkvory_sched import (
    ByteRange,
    DownloadClass,
    Grant,
    InMemoryDownloadScheduler,
    PrincipalKind,
    SchedulerSettings,
)
from arkvory_sched.testing import FakeClock

from .clients import TAIL_BYTES
from .engine import (
    MB,
    ClientKind,
    ClientSpec,
    LinkSimulation,
    RequestTimerLike,
    SimulationRun,
)
from .idle import IdleSlots
from .link import SharedLink

pytestmark = pytest.mark.simulation


def _grant(token: int) -> Grant:
    return Grant(token, "session", DownloadClass.BULK, None)


def _start(link: SharedLink[str], token: int, length: int, cap: float | None) -> None:
    link.start(token, f"t{token}", _grant(token), ByteRange(0, length), cap)


def test_a_capped_response_gets_its_cap_and_the_others_share_the_rest() -> None:
    link: SharedLink[str] = SharedLink(40.0)
    _start(link, 1, 100, None)
    _start(link, 2, 100, None)
    _start(link, 3, 100, 4.0)
    # 4 to the capped one, (40 - 4) / 2 = 18 to each other: both end at 100 / 18 s.
    assert link.next_completion(0.0) == pytest.approx((100 / 18, 1))
    link.advance(5.0)
    assert link.position(link.transfers[3]) == pytest.approx(20.0)
    assert link.position(link.transfers[1]) == pytest.approx(90.0)


def test_a_cap_above_the_equal_share_changes_nothing() -> None:
    link: SharedLink[str] = SharedLink(40.0)
    _start(link, 1, 100, None)
    _start(link, 2, 100, 30.0)
    link.advance(1.0)
    assert link.position(link.transfers[1]) == pytest.approx(20.0)
    assert link.position(link.transfers[2]) == pytest.approx(20.0)


def test_capped_responses_alone_leave_the_rest_of_the_link_unused() -> None:
    link: SharedLink[str] = SharedLink(40.0)
    _start(link, 1, 10, 2.0)
    _start(link, 2, 10, 5.0)
    assert link.next_completion(0.0) == pytest.approx((2.0, 2))
    link.advance(2.0)
    link.finish(2)
    assert link.next_completion(2.0) == pytest.approx((5.0, 1))


def test_idle_slots_count_only_while_someone_waits() -> None:
    idle = IdleSlots(2)
    idle.arrived(0.0)
    idle.started(0.0)
    idle.advance(3.0)  # one slot empty, nobody waiting: no loss
    idle.arrived(3.0)
    idle.advance(1.5)  # one slot empty while a client waits
    idle.started(4.5)
    idle.finished(10.0)
    idle.close(10.0)
    assert idle.idle_slot_seconds == pytest.approx(1.5)
    assert idle.longest_stretch == pytest.approx(1.5)


def _one_slot_run(clients: list[ClientSpec]) -> SimulationRun:
    settings = SchedulerSettings(sessions=1, reserve=0, max_downloads=1)
    clock = FakeClock()

    def build(timer: RequestTimerLike) -> InMemoryDownloadScheduler:
        return InMemoryDownloadScheduler(settings, clock=clock, request_timer=timer)

    simulation = LinkSimulation(
        build,
        clock,
        clients,
        bandwidth=40 * MB,
        slots=1,
        hold_seconds=settings.hold_seconds,
        hold_limit=settings.transfer_queue_limit,
    )
    return anyio.run(simulation.run)


def _tool(
    name: str,
    client: ClientKind,
    arrival: float,
    *,
    resume_from: int = 0,
    rate_cap: float | None = None,
) -> ClientSpec:
    return ClientSpec(
        name,
        name,
        PrincipalKind.SERVICE,
        40 * MB,
        arrival,
        client=client,
        rate_cap=rate_cap,
        resume_from=resume_from,
    )


def test_tools_without_an_id_are_held_and_send_what_their_range_says() -> None:
    """One slot, 40 MB/s: a whole GET takes 1 s; the ZIP reader, held meanwhile, then
    reads 64 KiB and the 40 MB body; the resume from 20 MB takes half a second."""
    run = _one_slot_run(
        [
            _tool("curl", ClientKind.GET, 0.0),
            _tool("zip", ClientKind.TAIL, 0.1),
            _tool("resume", ClientKind.RESUME, 0.2, resume_from=20 * MB),
        ]
    )
    curl, zip_reader, resume = run.results
    assert curl.first_start == 0.0
    assert curl.finished == pytest.approx(1.0)
    assert zip_reader.first_start is not None and resume.first_start is not None
    assert curl.finished is not None and zip_reader.finished is not None
    assert zip_reader.finished == pytest.approx(
        zip_reader.first_start + (TAIL_BYTES + 40 * MB) / (40 * MB)
    )
    assert resume.finished == pytest.approx(resume.first_start + 0.5)
    # Held by the middleware rather than sent away to sleep on a Retry-After: each
    # starts within a tick of the slot freeing.
    assert zip_reader.first_start - curl.finished <= 0.5
    assert resume.first_start - zip_reader.finished <= 0.5
    assert run.longest_idle_stretch <= 0.5


def test_a_slow_client_holds_its_slot_for_its_whole_download() -> None:
    run = _one_slot_run(
        [
            _tool("slow", ClientKind.GET, 0.0, rate_cap=4 * MB),
            _tool("next", ClientKind.SDK, 0.0),
        ]
    )
    slow, following = run.results
    assert slow.finished == pytest.approx(10.0)
    assert following.first_start is not None and following.first_start >= 10.0
