"""Ctrl-C during ``arkvoryctl download``: stop where the checkpoint is consistent.

Python's default ``KeyboardInterrupt`` can land in the middle of a write or of a
checkpoint update; a flag polled between chunks and sleep steps lets the download end
cleanly, keep its place in the queue and exit 130.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Final

__all__ = ["Interrupt"]

_SLEEP_SLICE: Final = 0.1
"""Seconds a sleep waits at most before it checks for Ctrl-C again."""


class Interrupt:
    """Ctrl-C sets a flag that the download polls between chunks and sleep steps, so it
    stops where its checkpoint is consistent; a second Ctrl-C stops at once."""

    def __init__(self) -> None:
        self.flag = threading.Event()
        self._previous: Callable[[int, FrameType | None], object] | int | None = None
        self._installed = False

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # signals reach only the main thread; an embedding caller handles them
        self._previous = signal.signal(signal.SIGINT, self._handle)
        self._installed = True

    def restore(self) -> None:
        if self._installed:
            previous = self._previous if self._previous is not None else signal.SIG_DFL
            signal.signal(signal.SIGINT, previous)
            self._installed = False

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.flag.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    def is_set(self) -> bool:
        return self.flag.is_set()

    def sleep(self, seconds: float) -> None:
        """``time.sleep`` that ends early on Ctrl-C (a plain sleep would resume after
        the signal and hold the user for up to a minute)."""
        end = time.monotonic() + seconds
        while not self.flag.is_set():
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, _SLEEP_SLICE))
