"""``python -m tests.simulation``: run the four scenarios and print their tables."""

from __future__ import annotations

import time

from .scenario_windows import scenario_4, scenario_4_table
from .scenarios import (
    scenario_1,
    scenario_1_table,
    scenario_2,
    scenario_2_table,
    scenario_3,
    scenario_3_table,
)


def main() -> None:
    started = time.perf_counter()
    print(scenario_1_table(scenario_1()), end="\n\n")
    print(scenario_2_table(scenario_2()), end="\n\n")
    print(scenario_3_table(scenario_3()), end="\n\n")
    print(scenario_4_table(scenario_4()), end="\n\n")
    print(f"simulated in {time.perf_counter() - started:.1f} s of real time")


if __name__ == "__main__":
    main()
