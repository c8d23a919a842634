"""The pure parts of ``benchmarks.pg_scale``: the queue its fill writes and its report.

The fill writes a million rows straight into the store's tables, so the turns it gives
must be the ones the store would have given: here they are checked against the
in-memory store, which assigns them itself.
"""

from __future__ import annotations

import math

import pytest
from benchmarks.pg_scale import (
    CHECK_PERIOD,
    DEADLINE_HORIZON,
    FULL,
    QUEUE_LIMIT,
    SESSION_COLUMNS,
    Clients,
    Figures,
    ScaleWorkload,
    SizeRun,
    fill_memory,
    goal_rows,
    heading,
    problems,
    render,
    scale_settings,
    session_row,
    waiting_for,
)

from arkvory_sched import InMemoryDownloadScheduler, Queued, generate_key
from arkvory_sched.testing import FakeClock

COLUMN = {name: number for number, name in enumerate(SESSION_COLUMNS)}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# ====================================================================== the queue
def test_the_million_keeps_room_below_the_queue_limit_and_smaller_sizes_fill_whole() -> None:
    assert waiting_for(65_536) == 65_536
    assert 1_048_000 <= waiting_for(1_048_576) < QUEUE_LIMIT


@pytest.mark.parametrize("waiting", [1, 7, 5_003])
def test_each_turn_is_the_principals_count_of_earlier_arrivals_plus_one(waiting: int) -> None:
    workload = ScaleWorkload(waiting)
    seen: dict[str, int] = {}
    for index in range(waiting + 2_500):  # the fill, then newcomers
        principal = workload.principal(index)
        seen[principal] = seen.get(principal, 0) + 1
        assert workload.turn(index) == seen[principal]
        if index == waiting - 1:
            assert dict(workload.principal_counts()) == seen


@pytest.mark.anyio
async def test_the_in_memory_store_places_every_waiter_at_its_index_plus_one() -> None:
    """The turns the fill writes into PostgreSQL are the store's own: the in-memory
    store, given the same arrivals through ``admit``, serves them in arrival order."""
    workload = ScaleWorkload(2_100)
    clock = FakeClock()
    scheduler = InMemoryDownloadScheduler(
        scale_settings(), clock=clock, ticket_keys=[generate_key()]
    )
    await Clients(scheduler, workload).start_holders()
    await fill_memory(scheduler, clock, workload)
    for index in range(workload.waiting):
        decision = await scheduler.admit(workload.request(index))
        assert isinstance(decision, Queued) and decision.position == index + 1, index
    await scheduler.admit(workload.request(workload.waiting))
    again = await scheduler.admit(workload.request(workload.waiting))
    assert isinstance(again, Queued) and again.position == workload.waiting + 1


def test_a_row_has_the_turn_after_the_current_round_and_deadlines_beyond_the_run() -> None:
    workload = ScaleWorkload(5_003)
    now, virtual_time = 1_000_000.0, 16
    for index in (0, 1, 3, 2_500, 5_002):
        row = session_row(workload, index, now, virtual_time, wall_offset=5.0)
        assert len(row) == len(SESSION_COLUMNS)
        assert row[COLUMN["order_key"]] == virtual_time + workload.turn(index)
        arrival = row[COLUMN["arrival"]]
        assert now - CHECK_PERIOD <= arrival <= now
        assert row[COLUMN["arrival_wall_ms"]] == math.floor((arrival + 5.0) * 1000)
        assert arrival <= row[COLUMN["last_activity"]] <= now
        assert row[COLUMN["check_at"]] <= now + CHECK_PERIOD
        assert row[COLUMN["no_show_at"]] > now + DEADLINE_HORIZON
        assert row[COLUMN["state"]] == 0 and row[COLUMN["promote_at"]] is None
        assert row[COLUMN["principal"]] == workload.principal(index)


# ====================================================================== the report
def _figures(
    store: str, poll_ms: float, newcomer_ms: float, tick_ms: float, waiting: int
) -> Figures:
    figures = Figures(store, claims=40)
    for label, position in (("first", 1), ("middle", waiting // 2 + 1), ("last", waiting)):
        figures.polls[label] = [poll_ms / 1000] * 100
        figures.positions[label] = [position] * 100
    figures.newcomers = [newcomer_ms / 1000] * 100
    figures.ranges = [10e-6] * 100
    figures.ticks = [tick_ms / 1000] * 40
    return figures


def _size(waiting: int, poll_ms: float, tick_ms: float, newcomer_ms: float = 1.5) -> SizeRun:
    return SizeRun(
        waiting,
        memory=_figures("in memory", 0.05, 0.06, 0.3, waiting),
        postgres=_figures("PostgreSQL", poll_ms, newcomer_ms, tick_ms, waiting),
    )


def test_the_goals_are_checked_at_the_largest_size_against_the_smaller() -> None:
    sizes = [_size(65_536, 1.0, 30.0), _size(1_048_000, 1.2, 40.0)]
    rows = "\n".join(goal_rows(sizes))
    assert "at 1,048,000 waiting" in rows and "65,536 → 1,048,000: ≤ 1.6×" in rows
    assert rows.count("**pass**") == 7 and "**FAIL**" not in rows
    sizes[-1] = _size(1_048_000, 200.0, 600.0, newcomer_ms=3.0)
    rows = "\n".join(goal_rows(sizes))
    assert rows.count("**FAIL**") == 5  # p50, p99, tick, its growth, the newcomer's growth


def test_one_size_is_judged_without_growth() -> None:
    rows = "\n".join(goal_rows([_size(65_536, 1.0, 30.0)]))
    assert rows.count("**pass**") == 5 and "grows" not in rows


def test_problems_name_wrong_answers_wrong_positions_and_ticks_that_did_not_lead() -> None:
    size = _size(65_536, 1.0, 30.0)
    assert problems([size]) == []
    size.memory.positions["middle"][3] = 7
    size.postgres.positions["middle"][3] = 7  # allowed: counted by bucket there
    size.postgres.positions["first"][0] = 2
    size.postgres.unexpected = 1
    size.postgres.unled = 2
    found = problems([size])
    assert len(found) == 4
    assert any("in memory" in text and "middle" in text for text in found)
    assert any("PostgreSQL" in text and "first" in text for text in found)
    assert any("2 measured ticks did not lead" in text for text in found)


def test_the_section_puts_both_stores_and_their_ratio_side_by_side() -> None:
    sizes = [_size(65_536, 1.0, 30.0), _size(1_048_000, 1.2, 40.0)]
    assert heading([65_536]) == "## PostgreSQL queue length: 65,536 waiting"
    text = render(sizes, FULL, ["--sizes", "65536,1048576"], "15", "0.1")
    assert text.startswith("## PostgreSQL queue length: 65,536 and 1,048,000 waiting\n")
    assert "| 65,536 | PostgreSQL | 1.00 ms / 1.00 ms / 1.00 ms |" in text
    assert "| 65,536 | in memory | 50.0 µs / 50.0 µs / 50.0 µs |" in text
    assert "| 65,536 | PostgreSQL ÷ in memory | 20.0× / 20.0× / 20.0× |" in text
