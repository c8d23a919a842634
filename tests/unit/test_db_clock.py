"""``DatabaseClock``: the database's time carried by the local clock, never backwards.

The local monotonic and wall clocks are fakes and the samples are made up, so each
rule of the extrapolation is checked exactly: the midpoint of the round trip, a step
forward, a hold (not a step back) when a sample is behind, the one step back allowed
at the first sample, and ``wall()`` untouched by any of it.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arkvory_sched import Clock
from arkvory_sched.postgres._db_clock import DatabaseClock

WALL = 1_780_000_000.0


class Local:
    """A fake process clock: monotonic seconds moved by hand."""

    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def make(local: Local, wall_offset: float = 0.0) -> DatabaseClock:
    return DatabaseClock(local=local, wall=lambda: WALL + wall_offset + local.now)


def test_it_is_a_clock() -> None:
    assert isinstance(DatabaseClock(), Clock)


def test_before_any_sample_it_reads_the_local_wall_clock_carried_forward() -> None:
    local = Local()
    clock = make(local)
    start = clock.monotonic()
    assert start == WALL + 50.0
    local.now += 2.5
    assert clock.monotonic() == start + 2.5
    assert not clock.synced


def test_a_sample_is_placed_at_the_midpoint_of_its_round_trip() -> None:
    local = Local()
    clock = make(local, wall_offset=-7.0)  # the node's wall clock is 7 s behind
    clock.sample(WALL + 100.0, sent=60.0, received=62.0)
    local.now = 61.0
    assert clock.synced
    assert clock.monotonic() == WALL + 100.0
    local.now = 64.0
    assert clock.monotonic() == WALL + 103.0


def test_the_first_sample_is_adopted_even_behind_the_local_wall_clock() -> None:
    local = Local()
    clock = make(local, wall_offset=3600.0)  # the node's wall clock is an hour ahead
    assert clock.monotonic() == WALL + 3650.0
    clock.sample(WALL + 50.0, sent=50.0, received=50.0)
    assert clock.monotonic() == WALL + 50.0


def test_a_sample_ahead_of_the_extrapolation_steps_forward() -> None:
    local = Local()
    clock = make(local)
    clock.sample(1000.0, sent=50.0, received=50.0)
    local.now = 51.0
    assert clock.monotonic() == 1001.0
    clock.sample(1005.0, sent=51.0, received=51.0)  # the local clock ran slow
    assert clock.monotonic() == 1005.0


def test_a_sample_behind_the_extrapolation_holds_until_it_catches_up() -> None:
    local = Local()
    clock = make(local)
    clock.sample(1000.0, sent=50.0, received=50.0)
    local.now = 60.0
    assert clock.monotonic() == 1010.0
    clock.sample(1007.0, sent=60.0, received=60.0)  # 3 s behind what was read
    assert clock.monotonic() == 1010.0, "stepped back"
    local.now = 62.0
    assert clock.monotonic() == 1010.0, "held for 2 of the 3 s"
    local.now = 64.0
    assert clock.monotonic() == 1011.0, "follows the new sample once it caught up"


def test_wall_is_the_local_wall_clock_whatever_the_samples_say() -> None:
    local = Local()
    clock = make(local, wall_offset=3600.0)
    clock.sample(5.0, sent=50.0, received=50.0)
    assert clock.wall() == WALL + 3650.0


@pytest.mark.anyio
async def test_refresh_times_the_statement_it_awaits() -> None:
    local = Local()
    clock = make(local)

    async def statement() -> float:
        local.now += 0.4  # the round trip
        return 2000.0

    await clock.refresh(statement())
    assert clock.monotonic() == 2000.2  # read at the midpoint, 0.2 s ago


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@given(
    st.lists(
        st.tuples(
            st.floats(min_value=0.0, max_value=5.0),  # local time to the next sample
            st.floats(min_value=0.0, max_value=0.5),  # its round trip
            st.floats(min_value=-3.0, max_value=3.0),  # the database's offset from local
        ),
        max_size=30,
    )
)
def test_once_synced_it_never_goes_backwards_and_ends_on_the_latest_sample(
    steps: list[tuple[float, float, float]],
) -> None:
    local = Local()
    clock = make(local)
    clock.sample(WALL + local.now, local.now, local.now)
    last = clock.monotonic()
    offset = 0.0
    for elapsed, round_trip, offset in steps:
        local.now += elapsed
        reading = clock.monotonic()
        assert reading >= last
        sent = local.now
        local.now += round_trip
        clock.sample(WALL + offset + (sent + local.now) / 2, sent, local.now)
        last = clock.monotonic()
        assert last >= reading
    # A hold lasts at most as far as the samples ever ran behind: 6 s here.
    local.now += 10.0
    assert clock.monotonic() == pytest.approx(WALL + offset + local.now)
