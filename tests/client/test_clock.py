"""Long waits are slept in steps of at most one minute, re-reading the wall clock each
step (R-CLIENT-5): a suspended laptop or a clock set forward ends the wait at the next
step; a clock set back does not prolong it. Run for the sync and the async sleep."""

from __future__ import annotations

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from arkvory_client import (
    CANCEL_CHECK_STEP,
    MAX_SLEEP_STEP,
    CancelCheck,
    DownloadCancelledError,
    SystemClock,
    sleep_until_wall,
    sleep_until_wall_sync,
)

from ._support import KINDS, FakeClock, Kind, Sleeps


def wait(
    kind: Kind,
    target: float,
    clock: FakeClock,
    sleeps: Sleeps,
    cancelled: CancelCheck | None = None,
) -> None:
    if kind == "sync":
        sleep_until_wall_sync(target, clock, sleeps, cancelled=cancelled)
        return

    async def main() -> None:
        await sleep_until_wall(target, clock, sleeps.async_sleep, cancelled=cancelled)

    anyio.run(main)


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> Kind:
    value: Kind = request.param
    return value


def test_an_hour_is_slept_in_sixty_one_minute_steps(kind: Kind) -> None:
    clock = FakeClock()
    sleeps = Sleeps(clock)
    wait(kind, clock.wall() + 3600, clock, sleeps)
    assert sleeps.steps == [60.0] * 60
    assert clock.wall() == pytest.approx(1_780_003_600.0)


@given(st.floats(min_value=0, max_value=5 * 3600))
def test_no_step_exceeds_a_minute_and_the_wait_is_exact(seconds: float) -> None:
    clock = FakeClock()
    sleeps = Sleeps(clock)
    target = clock.wall() + seconds
    sleep_until_wall_sync(target, clock, sleeps)
    assert all(0 < step <= MAX_SLEEP_STEP for step in sleeps.steps)
    assert sleeps.total == pytest.approx(seconds, abs=1e-6)  # wall time is ~1.8e9: ulp


def test_a_suspended_laptop_ends_the_wait_at_the_next_step(kind: Kind) -> None:
    clock = FakeClock()
    sleeps = Sleeps(clock)

    def suspend_during_third_step(step: int, seconds: float) -> None:
        if step == 3:
            clock.jump_wall(2 * 3600)  # the lid closed for two hours

    sleeps.hook = suspend_during_third_step
    wait(kind, clock.wall() + 3600, clock, sleeps)
    assert len(sleeps.steps) == 3
    assert sleeps.total == pytest.approx(180.0)


def test_a_clock_set_back_does_not_prolong_the_wait(kind: Kind) -> None:
    clock = FakeClock()
    sleeps = Sleeps(clock)

    def set_back(step: int, seconds: float) -> None:
        if step == 2:
            clock.jump_wall(-3 * 3600)

    sleeps.hook = set_back
    wait(kind, clock.wall() + 600, clock, sleeps)
    assert sleeps.total == pytest.approx(600.0)
    assert all(step <= MAX_SLEEP_STEP for step in sleeps.steps)


def test_a_target_in_the_past_does_not_sleep(kind: Kind) -> None:
    clock = FakeClock()
    sleeps = Sleeps(clock)
    wait(kind, clock.wall() - 10, clock, sleeps)
    assert sleeps.steps == []


def test_cancellation_is_checked_before_every_step(kind: Kind) -> None:
    """A caller that can cancel is heard within half a second, however long the wait."""
    clock = FakeClock()
    sleeps = Sleeps(clock)
    with pytest.raises(DownloadCancelledError):
        wait(kind, clock.wall() + 3600, clock, sleeps, cancelled=lambda: len(sleeps.steps) >= 3)
    assert sleeps.steps == [CANCEL_CHECK_STEP] * 3


def test_system_clock_reads_both_clocks() -> None:
    clock = SystemClock()
    assert clock.wall() > 1_600_000_000
    assert clock.monotonic() <= clock.monotonic()
    assert repr(clock) == "SystemClock()"
