"""The measured delivery rate behind start estimates (R-EST-1).

Estimates divide the bytes still to send by the rate the server can deliver. A mean
over the last minute falls whenever the queue idles between downloads, which stretches
the estimates, sends clients away for longer and so creates more idle time; the peak
of the last minute does not feed back that way.

The peak is taken of five-second means within runs of busy seconds, not of single
seconds (ADR 0028). Bytes are booked when a response reports, spread over its span, so
single seconds scatter a few per cent around what the link carried; the busiest of
sixty such seconds read a saturated 40 MiB/s link as up to 45.6 and every estimate
came that much early. Five seconds together lose or gain only what crossed their edges.

A reading counts only when it says something about the link (issue #28, ADR 0034):

* it comes from a run of at least :data:`MIN_RUN_SECONDS` busy seconds, so that one
  tiny read (a 1 KiB range in an otherwise idle minute) is not read as a 1 KiB/s link;
* the store may pass which seconds had the slots busy (:class:`BusySeconds`): a second
  in which nobody waited and a slot was free says what the clients took, not what the
  link can carry, and is read as idle.

A configured rate is raised by a reading only when it comes from a run of
:data:`RAISE_MIN_RUN_SECONDS`, a full span of whole seconds (ADR 0034, point 15): one
second scatters by a tenth around what the link carries (a shaper's first burst, the
handovers in it), and a single one read 43–47 MiB/s off a 40 MiB/s link told as such.
Every start announced over the next seconds came that much early, for the crowd that
had just arrived.

A cold server has no three busy seconds to read, and its first complete second may end
two seconds after the crowd came. Until then it reads its delivery run so far
(:meth:`PeakRateMeter.run_rate`: the bytes since delivery last began, over the time
since), which a store only uses to raise its guess: a crowd arriving at a cold server
saw its first estimates come 20 % late from the guess, by up to three times their
bound, for the two seconds before a second completed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = [
    "DEFAULT_SPAN_SECONDS",
    "DEFAULT_WINDOW_SECONDS",
    "MIN_RUN_SECONDS",
    "RAISE_MIN_RUN_SECONDS",
    "RUN_GAP_SECONDS",
    "RUN_MIN_SECONDS",
    "BusySeconds",
    "PeakRateMeter",
    "masked",
    "peak_of_means",
    "reading_min_run",
]

DEFAULT_WINDOW_SECONDS = 60
DEFAULT_SPAN_SECONDS = 5
MIN_RUN_SECONDS = 3
"""The shortest run of busy seconds that is read at all: its first and last second are
partial, so three is the least that leaves one whole second in between."""
RAISE_MIN_RUN_SECONDS = DEFAULT_SPAN_SECONDS + 2
"""With a configured rate, the shortest run that is read: a full span of whole seconds
between the run's partial first and last one."""
RUN_GAP_SECONDS = 1.0
"""A pause in delivery this long ends a delivery run (:meth:`PeakRateMeter.run_rate`)."""
RUN_MIN_SECONDS = 0.5
"""The shortest delivery run that is read: responses begin within the first tenths of
a second, and a shorter run reads their start, not the link."""


def reading_min_run(configured: bool) -> int:
    """The shortest run of busy seconds a store reads for its estimates: with a rate
    ``configured``, only a reading of a full span may raise it."""
    return RAISE_MIN_RUN_SECONDS if configured else MIN_RUN_SECONDS


def peak_of_means(
    seconds: Sequence[float], span: int = DEFAULT_SPAN_SECONDS, min_run: int = 1
) -> float:
    """The highest mean of ``span`` consecutive busy entries of ``seconds`` (bytes per
    second, in order, 0.0 for an idle second).

    Idle seconds never count: the mean is taken within each run of busy seconds, so a
    stretch of delivery reads at its pace however much idle time surrounds it, and
    keeps reading so until its last second leaves the window. The first and last
    second of a run are partial (delivery began or ended within them), so a run of
    three or more is read without them, and a shorter one by its busiest second, as a
    span of one reads every run. A run shorter than ``min_run`` is not read at all:
    the estimates pass :data:`MIN_RUN_SECONDS`, since a few reads scattered in a quiet
    minute say nothing about the link.

    One function for one process's meter and for the fleet's summed seconds on
    PostgreSQL, so both stores read the same rate from the same bytes.
    """
    if span < 1:
        raise ValueError(f"span must be at least 1, got {span}")
    best = 0.0
    run: list[float] = []
    for nbytes in [*seconds, 0.0]:  # the sentinel closes the last run
        if nbytes > 0:
            run.append(nbytes)
            continue
        if run:
            if len(run) >= min_run:
                best = max(best, _busiest_mean(run, span))
            run = []
    return best


def _busiest_mean(run: list[float], span: int) -> float:
    if span == 1 or len(run) <= 2:
        return max(run)
    inner = run[1:-1]
    if len(inner) <= span:
        return sum(inner) / len(inner)
    total = best = sum(inner[:span])
    for i in range(span, len(inner)):
        total += inner[i] - inner[i - span]
        best = max(best, total)
    return best / span


def masked(seconds: Sequence[float], busy: Sequence[bool]) -> list[float]:
    """``seconds`` with every second that was not busy read as idle (0.0)."""
    return [nbytes if flag else 0.0 for nbytes, flag in zip(seconds, busy, strict=True)]


class BusySeconds:
    """Which seconds of queue time had the slots busy: someone waited, or every slot
    was held (issue #28, ADR 0034).

    The store notes what it sees at each tick. A tick sees one instant, and ticks come
    every half second or so, so a second between two busy ticks counts as busy too;
    a second after a quiet tick counts only once a later tick saw it busy. Memory is
    fixed: a ring of the window's seconds, as in :class:`PeakRateMeter`.
    """

    __slots__ = ("_last_busy", "_ring", "_seconds")

    def __init__(self, window_seconds: int = DEFAULT_WINDOW_SECONDS) -> None:
        if window_seconds < 1:
            raise ValueError(f"window_seconds must be at least 1, got {window_seconds}")
        self._ring = window_seconds + 1
        self._seconds: list[int] = [slot - self._ring for slot in range(self._ring)]
        self._last_busy: int | None = None

    def note(self, now: float, busy: bool) -> None:
        """What a tick at ``now`` saw: the slots ``busy`` or not."""
        if not math.isfinite(now):
            raise ValueError(f"now must be finite, got {now!r}")
        second = math.floor(now)
        if not busy:
            self._last_busy = None
            return
        first = second if self._last_busy is None else max(self._last_busy, second - self._ring)
        for marked in range(first, second + 1):
            self._seconds[marked % self._ring] = marked
        self._last_busy = second

    def flags(self, first: int, count: int) -> list[bool]:
        """For each second ``first .. first + count - 1``: whether it was busy."""
        ring, seconds = self._ring, self._seconds
        return [seconds[second % ring] == second for second in range(first, first + count)]


class PeakRateMeter:
    """Delivery rate as the peak over the last minute of the bytes per second averaged
    over ``span_seconds`` (one second reads the busiest single second).

    Only complete one-second buckets of monotonic time count, so the second in progress
    never reads as a slow one. A response's bytes are spread evenly over the seconds it
    spanned, because responses are reported when they finish: booking an 8 MiB response
    entirely into its last second would make spiky buckets and overstate the peak.

    The buckets form a ring of ``window_seconds + 1`` slots indexed by second modulo the
    ring size, each remembering which second it holds, so that the window plus the
    second in progress fit and a slot left over from an earlier lap is recognised as
    stale. Memory is fixed whatever the traffic.
    """

    __slots__ = (
        "_bytes",
        "_newest",
        "_peak",
        "_peak_second",
        "_ring",
        "_run_bytes",
        "_run_end",
        "_run_start",
        "_seconds",
        "_span",
        "_window",
    )

    def __init__(
        self,
        window_seconds: int = DEFAULT_WINDOW_SECONDS,
        span_seconds: int = DEFAULT_SPAN_SECONDS,
    ) -> None:
        if window_seconds < 1:
            raise ValueError(f"window_seconds must be at least 1, got {window_seconds}")
        if not 1 <= span_seconds <= window_seconds:
            raise ValueError(
                f"span_seconds must be 1..{window_seconds} (the window), got {span_seconds}"
            )
        self._window = window_seconds
        self._span = span_seconds
        self._ring = window_seconds + 1
        self._bytes: list[float] = [0.0] * self._ring
        # Every slot starts as an empty bucket of a second that maps onto it.
        self._seconds: list[int] = [slot - self._ring for slot in range(self._ring)]
        self._newest: int | None = None
        # The last peak and the second it was read in: every poll asks for the rate,
        # and it changes only when a second completes or a response is booked.
        self._peak = 0.0
        self._peak_second: tuple[int, int] | None = None  # and the shortest run read
        # The current delivery run: when it began, until when bytes came, how many.
        self._run_start = self._run_end = -math.inf
        self._run_bytes = 0.0

    @property
    def window_seconds(self) -> int:
        return self._window

    @property
    def span_seconds(self) -> int:
        return self._span

    def record(self, start: float, end: float, nbytes: int) -> None:
        """Book ``nbytes`` delivered between monotonic ``start`` and ``end``.

        Each second ``[k, k + 1)`` gets the share of the bytes that its overlap with
        ``[start, end)`` is of the whole span. A response with no duration goes into
        the second containing ``end``. Seconds that have already left the window
        relative to the newest time recorded are skipped, so the work is bounded by
        the window however long the response ran.
        """
        if not (math.isfinite(start) and math.isfinite(end)):
            raise ValueError(f"times must be finite, got start={start!r}, end={end!r}")
        if nbytes < 0:
            raise ValueError(f"nbytes cannot be negative, got {nbytes}")
        if nbytes == 0:
            return
        self._peak_second = None
        if start > self._run_end + RUN_GAP_SECONDS:
            self._run_start, self._run_bytes = start, 0.0
        self._run_bytes += nbytes
        self._run_end = max(self._run_end, end)
        last = math.floor(end)
        newest = self._newest
        if newest is None or last > newest:
            newest = self._newest = last
        oldest_kept = newest - self._window
        if start >= last or end <= start:
            # An instant, or a span within one second, as nearly every small response
            # is: that second gets all the bytes (the loop below would give it
            # overlap / span = 1), without the loop, once per response on the hot path.
            if last >= oldest_kept:
                self._add(last, float(nbytes))
            return
        span = end - start
        first = max(math.floor(start), oldest_kept)
        # The second containing ``end`` gets nothing when ``end`` is exactly on its start.
        stop = math.ceil(end)
        for second in range(first, stop):
            overlap = min(end, second + 1) - max(start, second)
            if overlap > 0:
                self._add(second, nbytes * (overlap / span))

    def _add(self, second: int, amount: float) -> None:
        slot = second % self._ring
        if self._seconds[slot] != second:
            self._seconds[slot] = second
            self._bytes[slot] = 0.0
        self._bytes[slot] += amount

    def _complete_buckets(self, now: float) -> list[float]:
        # The ``window`` seconds that ended at or before ``now``: [K - window, K - 1].
        current = math.floor(now)
        found: list[float] = []
        for second in range(current - self._window, current):
            slot = second % self._ring
            if self._seconds[slot] == second:
                found.append(self._bytes[slot])
        return found

    def complete_seconds(self, now: float) -> tuple[int, list[float]]:
        """The window ending at ``now`` second by second: ``(first, bytes)``.

        ``bytes[i]`` is what second ``first + i`` carried, 0.0 for a second with
        nothing booked; the list always holds ``window_seconds`` entries, the last for
        the second before the one containing ``now``. Processes that book on one shared
        time scale can add their lists second by second: the peak of that sum is the
        rate of all of them together, which the sum of their own peaks overstates
        whenever they peak in different seconds (ADR 0027).
        """
        if not math.isfinite(now):
            raise ValueError(f"now must be finite, got {now!r}")
        first = math.floor(now) - self._window
        found: list[float] = []
        for second in range(first, first + self._window):
            slot = second % self._ring
            found.append(self._bytes[slot] if self._seconds[slot] == second else 0.0)
        return first, found

    def peak(
        self, now: float, busy: BusySeconds | None = None, *, min_run: int = MIN_RUN_SECONDS
    ) -> float:
        """The busiest ``span_seconds`` of the window ending at ``now``, in bytes per
        second; 0.0 if nothing was delivered in it. With ``busy`` the reading is the
        one estimates use: only the seconds it says were busy are read (the others as
        idle), and only runs of ``min_run`` or more (:func:`reading_min_run`); without
        ``busy``, every run."""
        if not math.isfinite(now):
            raise ValueError(f"now must be finite, got {now!r}")
        second = math.floor(now)
        if busy is None:
            min_run = 1
        if (second, min_run) != self._peak_second:
            first, seconds = self.complete_seconds(now)
            if busy is not None:
                seconds = masked(seconds, busy.flags(first, len(seconds)))
            self._peak = peak_of_means(seconds, self._span, min_run)
            self._peak_second = (second, min_run)
        return self._peak

    def run_rate(self, now: float) -> float:
        """The rate of the delivery run still going at ``now``: every byte booked since
        delivery last began after a pause of :data:`RUN_GAP_SECONDS`, over the time
        since; 0.0 for a run shorter than :data:`RUN_MIN_SECONDS` or one that ended.

        It reads the second in progress too, so a cold server knows its link within a
        second. It says what the clients took while the run lasted, which is the link's
        rate only if they kept it busy: a store uses it to raise a guess, never to
        lower one.
        """
        if not math.isfinite(now):
            raise ValueError(f"now must be finite, got {now!r}")
        span = now - self._run_start
        if span < RUN_MIN_SECONDS or now > self._run_end + RUN_GAP_SECONDS:
            return 0.0
        return self._run_bytes / span

    def total_recent(self, now: float) -> int:
        """Bytes booked into the complete seconds of the window ending at ``now``."""
        if not math.isfinite(now):
            raise ValueError(f"now must be finite, got {now!r}")
        return round(sum(self._complete_buckets(now)))

    def __repr__(self) -> str:
        return f"PeakRateMeter(window_seconds={self._window}, span_seconds={self._span})"
