"""The ideal a scheduler is measured against: whole files in arrival order, no idle slot."""

from __future__ import annotations

from .clients import ClientSpec

__all__ = ["oracle_completions", "oracle_with_speeds"]


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


def oracle_with_speeds(clients: list[ClientSpec], bandwidth: float) -> list[float]:
    """The ideal that knows each client's speed (issue #30): whole files in arrival
    order, the next one started the instant the running ones leave the link room
    (their caps add up to less than it; an uncapped client fills it alone), the link
    shared max-min as the simulation shares it. Completion times in client order."""
    order = sorted(range(len(clients)), key=lambda index: (clients[index].arrival, index))
    completions = [0.0] * len(clients)
    left: dict[int, float] = {}  # running client -> bytes still to send
    now, cursor = 0.0, 0

    def demand() -> float:
        return sum(clients[i].rate_cap or float("inf") for i in left)

    while cursor < len(order) or left:
        while cursor < len(order) and clients[order[cursor]].arrival <= now:
            if left and demand() >= bandwidth:
                break
            index = order[cursor]
            left[index] = float(clients[index].size)
            cursor += 1
        rates = _max_min(bandwidth, {i: clients[i].rate_cap for i in left})
        next_arrival = float("inf")
        if cursor < len(order) and clients[order[cursor]].arrival > now:
            next_arrival = clients[order[cursor]].arrival  # one already here waits for room
        finish = min(
            ((left[i] / rates[i], i) for i in left if rates[i] > 0), default=(float("inf"), -1)
        )
        step = min(finish[0], next_arrival - now)
        if step == float("inf"):
            break
        for i in left:
            left[i] -= rates[i] * step
        now += step
        for i in [i for i, bytes_left in left.items() if bytes_left <= 1e-6]:
            del left[i]
            completions[i] = now - clients[i].arrival
    return completions


def _max_min(bandwidth: float, caps: dict[int, float | None]) -> dict[int, float]:
    """Each transfer's rate: capped ones below the equal share keep their cap, the rest
    share what is left (as :meth:`SharedLink._level`)."""
    rates: dict[int, float] = {}
    remaining, open_ = bandwidth, dict(caps)
    for index, cap in sorted(
        ((i, c) for i, c in caps.items() if c is not None), key=lambda item: item[1]
    ):
        if cap * len(open_) > remaining:
            break
        rates[index] = cap
        remaining -= cap
        del open_[index]
    for index in open_:
        rates[index] = remaining / len(open_)
    return rates
