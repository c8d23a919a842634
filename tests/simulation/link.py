"""The simulated link: one pipe of ``bandwidth`` bytes/s shared by every response in flight.

Processor sharing with caps (water-filling): a response whose client cannot take more
than its ``cap`` gets that cap when it is below the equal share, and the responses
without a cap share what is left equally. Without a capped response this is plain
processor sharing, computed with exactly the arithmetic the simulation always used (a
virtual clock of bytes per uncapped response), so scenarios without slow clients keep
their figures to the last digit.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Generic, TypeVar

from arkvory_sched import ByteRange, Grant

__all__ = ["SharedLink", "Transfer"]

Owner = TypeVar("Owner")


@dataclass(slots=True)
class Transfer(Generic[Owner]):
    """One response in flight.

    An uncapped response lives on the link's virtual clock: ``finish_virtual`` and
    ``reported_virtual`` are readings of it. A capped one counts its own bytes in
    ``sent``: then ``finish_virtual`` is its length and ``reported_virtual`` what its
    progress reports already said.
    """

    owner: Owner
    grant: Grant
    byte_range: ByteRange
    finish_virtual: float
    reported_virtual: float
    cap: float | None = None
    sent: float = 0.0


class SharedLink(Generic[Owner]):
    """The responses in flight and the bytes each has sent, on simulated time."""

    def __init__(self, bandwidth: float) -> None:
        self.bandwidth = bandwidth
        self.transfers: dict[int, Transfer[Owner]] = {}
        self.virtual = 0.0
        self._finishing: list[tuple[float, int]] = []
        self._capped: dict[int, Transfer[Owner]] = {}

    @property
    def busy(self) -> bool:
        return bool(self.transfers)

    def start(
        self, token: int, owner: Owner, grant: Grant, byte_range: ByteRange, cap: float | None
    ) -> None:
        if cap is None:
            transfer = Transfer(
                owner, grant, byte_range, self.virtual + byte_range.length, self.virtual
            )
            heapq.heappush(self._finishing, (transfer.finish_virtual, token))
        else:
            transfer = Transfer(owner, grant, byte_range, float(byte_range.length), 0.0, cap)
            self._capped[token] = transfer
        self.transfers[token] = transfer

    def position(self, transfer: Transfer[Owner]) -> float:
        """Where ``transfer``'s own count stands, on the scale of its ``reported_virtual``."""
        return self.virtual if transfer.cap is None else transfer.sent

    def next_completion(self, now: float) -> tuple[float, int] | None:
        """When the next response ends, and its token; ``None`` with nothing in flight."""
        finishing = self._finishing
        while finishing and finishing[0][1] not in self.transfers:
            heapq.heappop(finishing)
        if not self._capped:
            if not finishing:
                return None
            finish_virtual, token = finishing[0]
            per_transfer = self.bandwidth / len(self.transfers)
            return now + max(0.0, finish_virtual - self.virtual) / per_transfer, token
        level = self._level()
        best: tuple[float, int] | None = None
        if finishing:
            finish_virtual, token = finishing[0]
            best = now + max(0.0, finish_virtual - self.virtual) / level, token
        for token, transfer in self._capped.items():
            rate = min(transfer.cap or level, level)
            at = now + max(0.0, transfer.finish_virtual - transfer.sent) / rate
            if best is None or at < best[0]:
                best = at, token
        return best

    def advance(self, elapsed: float) -> None:
        count = len(self.transfers)
        if not count:
            return
        if not self._capped:
            self.virtual += elapsed * self.bandwidth / count
            return
        level = self._level()
        if level != float("inf"):
            self.virtual += elapsed * level
        for transfer in self._capped.values():
            transfer.sent += elapsed * min(transfer.cap or level, level)

    def finish(self, token: int) -> Transfer[Owner]:
        """Take the response that just ended out of the link."""
        transfer = self.transfers.pop(token)
        if transfer.cap is None:
            if self._finishing and self._finishing[0][1] == token:
                heapq.heappop(self._finishing)
        else:
            del self._capped[token]
        return transfer

    def carrying(self) -> float:
        """Bytes per second the link carries now: all of it while an uncapped response
        runs, else what the capped ones can take, at most the link."""
        if not self.transfers:
            return 0.0
        if len(self._capped) < len(self.transfers):
            return self.bandwidth
        return min(self.bandwidth, sum(transfer.cap or 0.0 for transfer in self._capped.values()))

    def _level(self) -> float:
        """The rate of each uncapped response (``inf`` when there is none): capped
        responses below the equal share keep their cap, the rest share what is left."""
        remaining = self.bandwidth
        left = len(self.transfers)
        for cap in sorted(transfer.cap or 0.0 for transfer in self._capped.values()):
            if cap * left > remaining:
                break
            remaining -= cap
            left -= 1
        return remaining / left if left else float("inf")
