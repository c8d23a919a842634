"""The queue ``pg_scale`` measures: who waits, in which order, which turn each one has.

Everything is a pure function of a download's index, so the parent process, the server
processes and the in-memory store agree on every request without sharing a list of a
million entries (a list in a server process would also show up in its memory figure).

The waiting downloads, in arrival order ``0 .. waiting - 1``, all in class ``release``
(service accounts): one arrival in four is the only download of a principal of its own
(``solo-…``, the tail of one-off principals), the others come from up to 1,000 CI
principals (``ci-…``) in turn, so at 1,048,000 waiting each CI principal has 786. A
principal's k-th waiter gets round-robin turn k of the current round, as ``ROUND_TAG``
and the in-memory fair queue both assign it (``last_tag = max(virtual time, last_tag) +
1``), so the queue's service order is (turn, arrival). Downloads after the fill
(``index >= waiting``) are newcomers of the CI principals: each takes its principal's
next turn, after every turn of the fill, so it joins at the end of the queue.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from arkvory_sched import ByteRange, DownloadRequest, PrincipalKind, SchedulerSettings
from benchmarks._core_run import object_size

__all__ = [
    "CI_PRINCIPALS",
    "HEADROOM",
    "HOLDER_BYTES",
    "QUEUE_LIMIT",
    "RANGE_BYTES",
    "SESSIONS",
    "ScaleWorkload",
    "holder_request",
    "scale_settings",
    "waiting_for",
]

KIB: Final = 1024
MIB: Final = 1024 * KIB
GIB: Final = 1024 * MIB

QUEUE_LIMIT: Final = 1_048_576  # the largest queue_limit the settings accept
HEADROOM: Final = 576  # places left for the slot holders and the newcomers (as core_bench)
SESSIONS: Final = 16  # slots: 15 for release, 1 reserved for interactive
QUEUE_PER_PRINCIPAL: Final = 4_096
CI_PRINCIPALS: Final = 1_000
SOLO_EVERY: Final = 4  # one arrival in four is a principal's only download
RANGE_BYTES: Final = 1 * MIB  # what an active download fetches per step
HOLDER_BYTES: Final = 64 * GIB  # the first slot holders' objects: never done by themselves


def scale_settings() -> SchedulerSettings:
    """The same settings for every size and both stores (ordered, tickets on)."""
    return SchedulerSettings(
        sessions=SESSIONS, queue_limit=QUEUE_LIMIT, queue_per_principal=QUEUE_PER_PRINCIPAL
    )


def waiting_for(size: int) -> int:
    """Waiting downloads filled for a nominal size: the queue limit counts active and
    waiting sessions, so the largest queue keeps ``HEADROOM`` places free."""
    return max(0, min(size, QUEUE_LIMIT - HEADROOM))


@dataclass(frozen=True, slots=True)
class ScaleWorkload:
    """Download ``index`` -> its request, principal and round-robin turn."""

    waiting: int

    @property
    def solo_count(self) -> int:
        return self.waiting // SOLO_EVERY

    @property
    def ci_waiting(self) -> int:
        return self.waiting - self.solo_count

    @property
    def ci_count(self) -> int:
        """CI principals: 1,000, or one per CI waiter in a smaller queue (each has one);
        newcomers to an empty queue come from all 1,000."""
        return min(CI_PRINCIPALS, self.ci_waiting) or CI_PRINCIPALS

    def is_solo(self, index: int) -> bool:
        return index < self.waiting and index % SOLO_EVERY == SOLO_EVERY - 1

    def _ci_number(self, index: int) -> int:
        """The arrival's number among the CI arrivals (newcomers continue the count)."""
        if index >= self.waiting:
            return self.ci_waiting + index - self.waiting
        return index - (index + 1) // SOLO_EVERY

    def principal(self, index: int) -> str:
        if self.is_solo(index):
            return f"solo-{index // SOLO_EVERY}"
        return f"ci-{self._ci_number(index) % self.ci_count}"

    def turn(self, index: int) -> int:
        """The principal's k-th download of the fill (k = 1, 2, …): its round-robin turn
        after the current round. Newcomers continue their principal's count."""
        if self.is_solo(index):
            return 1
        return self._ci_number(index) // self.ci_count + 1

    def request(self, index: int, start: int = 0, length: int = RANGE_BYTES) -> DownloadRequest:
        size = object_size(index)
        return DownloadRequest(
            principal=self.principal(index),
            principal_kind=PrincipalKind.SERVICE,
            object_id=f"artifact-{index % 8192}",
            object_size=size,
            byte_range=ByteRange(start, min(size, start + length)),
            download_id=f"dl-{index:x}",
        )

    def service_order(self) -> list[int]:
        """The waiting downloads in the order the queue serves them: by turn, then by
        arrival (a stable sort; rows of one turn keep their arrival order)."""
        return sorted(range(self.waiting), key=self.turn)

    def principal_counts(self) -> Iterator[tuple[str, int]]:
        """(principal, waiting downloads of the fill) for every principal of the fill;
        a principal's last turn equals its count."""
        if not self.waiting:
            return
        whole, rest = divmod(self.ci_waiting, self.ci_count)
        for number in range(self.ci_count):
            count = whole + (number < rest)
            if count:
                yield f"ci-{number}", count
        for solo in range(self.solo_count):
            yield f"solo-{solo}", 1


def holder_request(number: int, start: int = 0, length: int = RANGE_BYTES) -> DownloadRequest:
    """A slot holder of the start: ``number`` 0 is interactive (the reserved slot), the
    others release; each downloads a 64 GiB object of its own."""
    interactive = number == 0
    return DownloadRequest(
        principal=f"holder-{number}",
        principal_kind=PrincipalKind.PERSON if interactive else PrincipalKind.SERVICE,
        object_id=f"holder-object-{number}",
        object_size=HOLDER_BYTES,
        byte_range=ByteRange(start, min(HOLDER_BYTES, start + length)),
        download_id=f"holder-{number}",
    )
