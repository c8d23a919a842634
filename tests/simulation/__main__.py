"""``python -m tests.simulation``: run the five scenarios and print their tables.

The crowd of scenario 5 also runs on PostgreSQL when the test database answers
(``$ARKVORY_TEST_DATABASE_URL`` or the local default); otherwise its columns are left
out, with the reason.
"""

from __future__ import annotations

import time

import anyio
import asyncpg

from arkvory_sched.postgres._cli import where
from tests.pg import database_url

from .scenario_crowd import CrowdRun, Store, crowd_table, scenario_crowd
from .scenario_sizing import scenario_6, scenario_6_table
from .scenario_windows import scenario_4, scenario_4_table
from .scenarios import (
    scenario_1,
    scenario_1_table,
    scenario_2,
    scenario_2_table,
    scenario_3,
    scenario_3_table,
)


def crowd_runs() -> list[CrowdRun]:
    runs = [scenario_crowd(Store.MEMORY, configured=c) for c in (True, False)]
    url = database_url()
    try:
        for configured in (True, False):
            runs.append(scenario_crowd(Store.POSTGRES, configured=configured, database_url=url))
    except OSError as error:
        print(f"PostgreSQL at {where(url)} did not answer ({error}): its crowd is left out.\n")
    return runs


def _reachable(url: str) -> str:
    """``url`` if its database answers, else "" (scenario 6 then runs on memory only)."""
    try:
        anyio.run(_ping, url)
    except OSError as error:
        print(f"PostgreSQL at {where(url)} did not answer ({error}): scenario 6 runs in memory.")
        return ""
    return url


async def _ping(url: str) -> None:
    connection = await asyncpg.connect(url)
    await connection.close()


def main() -> None:
    started = time.perf_counter()
    print(scenario_1_table(scenario_1()), end="\n\n")
    print(scenario_2_table(scenario_2()), end="\n\n")
    print(scenario_3_table(scenario_3()), end="\n\n")
    print(scenario_4_table(scenario_4()), end="\n\n")
    print(crowd_table(crowd_runs()), end="\n\n")
    print(scenario_6_table(scenario_6(_reachable(database_url()))), end="\n\n")
    print(f"simulated in {time.perf_counter() - started:.1f} s of real time")


if __name__ == "__main__":
    main()
