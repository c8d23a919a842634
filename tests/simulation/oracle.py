"""The ideal a scheduler is measured against: whole files in arrival order, no idle slot."""

from __future__ import annotations

from .clients import ClientSpec

__all__ = ["oracle_completions"]


def oracle_completions(clients: list[ClientSpec], slots: int, bandwidth: float) -> list[float]:
    """The ideal: ``slots`` whole files at a time in arrival order, never an idle slot.

    Same processor-sharing link as the simulation, but a file starts the instant a slot
    frees. Returns completion times (finish − arrival) in client order.
    """
    order = sorted(range(len(clients)), key=lambda index: (clients[index].arrival, index))
    pending = list(order)
    completions = [0.0] * len(clients)
    running: dict[int, float] = {}  # client index -> virtual finish
    virtual = 0.0
    now = 0.0
    cursor = 0
    while cursor < len(pending) or running:
        while (
            cursor < len(pending)
            and len(running) < slots
            and (clients[pending[cursor]].arrival <= now)
        ):
            index = pending[cursor]
            running[index] = virtual + clients[index].size
            cursor += 1
        next_arrival = clients[pending[cursor]].arrival if cursor < len(pending) else float("inf")
        if not running:
            now = next_arrival
            continue
        index, finish_virtual = min(running.items(), key=lambda item: item[1])
        per = bandwidth / len(running)
        finish_time = now + (finish_virtual - virtual) / per
        if len(running) < slots and next_arrival < finish_time:
            virtual += (next_arrival - now) * per
            now = next_arrival
            continue
        virtual = finish_virtual
        now = finish_time
        del running[index]
        completions[index] = now - clients[index].arrival
    return completions
