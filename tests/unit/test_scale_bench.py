"""The pure parts of ``benchmarks.pg_scale``: the queue its fill writes and its report.

The fill writes a million rows straight into the store's tables, so the turns it gives
must be the ones the store would have given: here they are checked against the
in-memory store, which assigns them itself.
"""

from __future__ import annotations

import math
import pickle
from collections import Counter

import pytest
from benchmarks._scale_driver import Driver, MemoryPacer, Plan
from benchmarks._scale_figures import (
    ClientFigures,
    PollFigures,
    SizeRun,
    StoreRun,
    TickSample,
    p99,
    ratio,
)
from benchmarks._scale_fill import (
    DEADLINE_HORIZON,
    SESSION_COLUMNS,
    SPREAD,
    SessionRows,
    fill_memory,
    session_row,
)
from benchmarks._scale_report import ScaleRun, goal_rows, heading, problems, render
from benchmarks._scale_workload import (
    CI_PRINCIPALS,
    QUEUE_LIMIT,
    ScaleWorkload,
    scale_settings,
    waiting_for,
)
from benchmarks.pg_scale import FAR_SAMPLES, HEAD_LIST, QUICK, make_plan

from arkvory_sched import InMemoryDownloadScheduler, Queued, generate_key
from arkvory_sched.testing import FakeClock

COLUMN = {name: number for number, name in enumerate(SESSION_COLUMNS)}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# ====================================================================== the queue
def test_the_million_keeps_room_below_the_queue_limit_and_smaller_sizes_fill_whole() -> None:
    assert waiting_for(65_536) == 65_536
    assert waiting_for(1_048_576) < QUEUE_LIMIT
    assert waiting_for(1_048_576) >= 1_048_000


def test_the_million_has_a_thousand_ci_principals_of_hundreds_and_a_tail_of_one_offs() -> None:
    workload = ScaleWorkload(waiting_for(1_048_576))
    counts = dict(workload.principal_counts())
    ci = [count for name, count in counts.items() if name.startswith("ci-")]
    solo = [count for name, count in counts.items() if name.startswith("solo-")]
    assert len(ci) == CI_PRINCIPALS
    assert min(ci) >= 700 and max(ci) - min(ci) <= 1
    assert len(solo) == workload.waiting // 4 and set(solo) == {1}
    assert sum(counts.values()) == workload.waiting


@pytest.mark.parametrize("waiting", [1, 7, 512, 5_003])
def test_each_turn_is_the_principals_count_of_earlier_arrivals_plus_one(waiting: int) -> None:
    workload = ScaleWorkload(waiting)
    seen: Counter[str] = Counter()
    for index in range(waiting):
        principal = workload.principal(index)
        seen[principal] += 1
        assert workload.turn(index) == seen[principal]
    assert dict(workload.principal_counts()) == dict(seen)


@pytest.mark.parametrize("waiting", [0, 512, 5_003])
def test_newcomers_take_turns_after_every_turn_of_the_fill_in_arrival_order(
    waiting: int,
) -> None:
    workload = ScaleWorkload(waiting)
    last = max((workload.turn(i) for i in range(waiting)), default=0)
    newcomers = [workload.turn(i) for i in range(waiting, waiting + 2_500)]
    assert newcomers == sorted(newcomers)
    assert min(newcomers) >= last
    # A newcomer's turn is its principal's next one, after the fill's downloads of it.
    counts = dict(workload.principal_counts())
    first = workload.principal(waiting)
    assert workload.turn(waiting) == counts.get(first, 0) + 1


def test_the_service_order_is_by_turn_then_arrival() -> None:
    workload = ScaleWorkload(5_003)
    order = workload.service_order()
    assert sorted(order) == list(range(5_003))
    keys = [(workload.turn(index), index) for index in order]
    assert keys == sorted(keys)


@pytest.mark.anyio
async def test_the_in_memory_store_answers_the_fills_service_order_as_positions() -> None:
    """The turns the fill writes into PostgreSQL are the store's own: the in-memory
    store, given the same arrivals through ``admit``, places every waiter where the
    fill's service order says."""
    workload = ScaleWorkload(700)
    clock = FakeClock()
    scheduler = InMemoryDownloadScheduler(
        scale_settings(), clock=clock, ticket_keys=[generate_key()]
    )
    driver = Driver(scheduler, workload, MemoryPacer(clock.advance, scheduler))
    await driver.start_holders()
    await fill_memory(scheduler, clock, workload)
    for position, index in enumerate(workload.service_order(), start=1):
        decision = await scheduler.admit(workload.request(index))
        assert isinstance(decision, Queued)
        assert decision.position == position, index
    newcomer = await scheduler.admit(workload.request(workload.waiting))
    assert isinstance(newcomer, Queued)
    again = await scheduler.admit(workload.request(workload.waiting))
    assert isinstance(again, Queued) and again.position == workload.waiting + 1


# ====================================================================== the rows
def test_a_row_has_the_turn_after_the_current_round_and_deadlines_beyond_the_run() -> None:
    workload = ScaleWorkload(5_003)
    now, virtual_time = 1_000_000.0, 16
    for index in (0, 1, 3, 2_500, 5_002):
        row = session_row(workload, index, now, virtual_time, wall_offset=5.0)
        assert len(row) == len(SESSION_COLUMNS)
        assert row[COLUMN["order_key"]] == virtual_time + workload.turn(index)
        arrival = row[COLUMN["arrival"]]
        assert now - SPREAD <= arrival <= now
        assert row[COLUMN["arrival_wall_ms"]] == math.floor((arrival + 5.0) * 1000)
        assert arrival <= row[COLUMN["last_activity"]] <= now
        assert row[COLUMN["check_at"]] <= now + SPREAD
        assert row[COLUMN["no_show_at"]] > now + DEADLINE_HORIZON
        assert row[COLUMN["state"]] == 0 and row[COLUMN["promote_at"]] is None
        assert row[COLUMN["principal"]] == workload.principal(index)


def test_rows_come_in_arrival_order_and_count_every_key_into_its_shard() -> None:
    workload = ScaleWorkload(2_000)
    rows = SessionRows(workload, 1_000_000.0, 0, 0.0)
    made = list(rows)
    arrivals = [row[COLUMN["arrival"]] for row in made]
    assert arrivals == sorted(arrivals) and len(set(arrivals)) == len(arrivals)
    assert sum(rows.shards) == 2_000
    assert rows.shards == [sum(1 for row in made if row[0][0] % 16 == shard) for shard in range(16)]
    assert len({row[0] for row in made}) == 2_000  # one session per download


# ====================================================================== the plan
def test_the_plan_polls_the_first_middle_and_last_waiter_by_service_order() -> None:
    workload = ScaleWorkload(5_003)
    order = workload.service_order()
    plan = make_plan(workload, QUICK, seed=1)
    assert plan.positions == (
        ("first", order[0], 1),
        ("middle", order[2_501], 2_502),
        ("last", order[-1], 5_003),
    )
    assert plan.heads == tuple(order[:HEAD_LIST])
    assert len(plan.far) == FAR_SAMPLES
    ranks = {index: position for position, index in enumerate(order)}
    assert all(ranks[index] >= HEAD_LIST for index in plan.far)
    assert plan.churn_first > plan.waiting + plan.newcomers
    assert make_plan(workload, QUICK, seed=1) == plan


def test_on_the_empty_queue_the_heads_are_the_newcomers() -> None:
    plan = make_plan(ScaleWorkload(0), QUICK, seed=1)
    assert plan.positions == () and plan.far == ()
    assert plan.heads[0] == 0 and plan.heads == tuple(sorted(plan.heads))


# ====================================================================== the report
def _store(name: str, poll_ms: float, newcomer_ms: float, tick_ms: float, waiting: int) -> StoreRun:
    clients = ClientFigures()
    for label, position in (("first", 1), ("middle", waiting // 2 + 1), ("last", waiting)):
        clients.polls[label] = PollFigures(
            label, position, [poll_ms / 1000] * 100, [position] * 100
        )
    clients.newcomer_seconds = [newcomer_ms / 1000] * 100
    clients.range_seconds = [10e-6] * 100
    ticks = [TickSample(float(n), tick_ms / 1000, True) for n in range(40)]
    return StoreRun(name, clients, ticks)


def _size(waiting: int, poll_ms: float, tick_ms: float, newcomer_ms: float = 1.5) -> SizeRun:
    return SizeRun(
        waiting,
        memory=_store("in memory", 0.05, 0.06, 0.3, waiting),
        postgres=_store("PostgreSQL", poll_ms, newcomer_ms, tick_ms, waiting),
    )


def test_the_goals_are_checked_at_the_largest_size_against_the_smaller() -> None:
    run = ScaleRun(sizes=[_size(65_536, 1.0, 30.0), _size(1_048_000, 1.2, 40.0)])
    rows = "\n".join(goal_rows(run))
    assert "at 1,048,000 waiting" in rows and "65,536 → 1,048,000: ≤ 1.6×" in rows
    assert rows.count("**pass**") == 7 and "**FAIL**" not in rows
    run.sizes[-1] = _size(1_048_000, 200.0, 600.0, newcomer_ms=3.0)
    rows = "\n".join(goal_rows(run))
    assert rows.count("**FAIL**") == 5  # p50, p99, tick, its growth, the newcomer's growth


def test_one_size_is_judged_without_growth() -> None:
    rows = "\n".join(goal_rows(ScaleRun(sizes=[_size(65_536, 1.0, 30.0)])))
    assert rows.count("**pass**") == 5 and "grows" not in rows


def test_problems_name_wrong_kinds_of_answers_and_wrong_positions() -> None:
    run = ScaleRun(sizes=[_size(65_536, 1.0, 30.0)])
    assert problems(run) == []
    size = run.sizes[0]
    assert size.memory is not None and size.postgres is not None
    size.memory.clients.polls["middle"].positions[3] = 7
    size.postgres.clients.polls["middle"].positions[3] = 7  # allowed: not exact there
    size.postgres.clients.polls["first"].positions[0] = 2
    size.postgres.clients.churn.unexpected = 1
    found = problems(run)
    assert len(found) == 3
    assert any("in memory" in text and "middle" in text for text in found)
    assert any("PostgreSQL" in text and "first" in text for text in found)


def test_the_section_puts_both_stores_and_their_ratio_side_by_side() -> None:
    run = ScaleRun(sizes=[_size(65_536, 1.0, 30.0), _size(1_048_000, 1.2, 40.0)])
    assert heading([65_536]) == "## PostgreSQL queue length: 65,536 waiting"
    text = render(run, ["--sizes", "65536,1048576"], 12.0, "0.1; 0.2")
    assert text.startswith("## PostgreSQL queue length: 65,536 and 1,048,000 waiting\n")
    assert "| 65,536 | PostgreSQL | 1.00 ms / 1.00 ms / 1.00 ms |" in text
    assert "| 65,536 | in memory | 50.0 µs / 50.0 µs / 50.0 µs |" in text
    assert "| 65,536 | PostgreSQL ÷ in memory | 20.0× / 20.0× / 20.0× |" in text


def test_statistics_are_nearest_rank_and_ratios_of_unmeasured_figures_are_unknown() -> None:
    values = [float(v) for v in range(1, 201)]
    assert p99(values) == 198.0
    assert p99(values[:50]) == 50.0
    assert math.isnan(ratio(1.0, 0.0)) and math.isnan(ratio(math.nan, 2.0))
    assert ratio(3.0, 2.0) == 1.5


def test_a_plan_is_plain_data_the_parent_can_send_to_a_server_process() -> None:
    plan = make_plan(ScaleWorkload(512), QUICK, seed=3)
    assert pickle.loads(pickle.dumps(plan)) == plan
    assert isinstance(plan, Plan)
