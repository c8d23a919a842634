"""The partial file: where a download's bytes live until the object is complete.

Bytes go to ``<dest>.part`` next to the destination, never into ``dest`` itself. Only a
complete object, synced to disk, is renamed over ``dest`` (atomic on POSIX and Windows),
so ``dest`` is either absent, the previous file, or the whole new object — never a
prefix and never a mix of two versions (R-CLIENT-8). A ``.part`` file plus the last
:class:`~arkvory_client.DownloadState` reported is what a resume continues from.

This is blocking file I/O; the async client runs the slow parts (open, fsync, rename) in
a worker thread and writes chunks inline, since a write to the page cache is short.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import BinaryIO, Final

from ._events import DownloadState
from ._steps import BodyPlan

__all__ = ["PART_SUFFIX", "PartFile", "part_path", "resume_offset"]

PART_SUFFIX: Final = ".part"


def part_path(dest: Path) -> Path:
    """Where the bytes of ``dest`` are kept until it is complete."""
    return dest.with_name(dest.name + PART_SUFFIX)


def resume_offset(state: DownloadState | None, saved: int | None, *, resume: bool) -> int:
    """How many saved bytes may be kept: ``0`` unless an ETag vouches for them.

    A prefix without an ETag cannot be checked against the server's current version, so
    keeping it could mix two versions; it is downloaded again. ``saved`` is the size of
    the ``.part`` file (``None`` when there is none); bytes beyond ``state.done`` were
    never confirmed and are dropped.
    """
    if not resume or state is None or state.etag is None or saved is None:
        return 0
    return min(state.done, saved)


class PartFile:
    """An open ``.part`` file positioned for the next response body."""

    __slots__ = ("_file", "dest", "path")

    def __init__(self, dest: Path, file: BinaryIO) -> None:
        self.dest = dest
        self.path = part_path(dest)
        self._file = file

    @classmethod
    def open(cls, dest: Path, *, state: DownloadState | None, resume: bool) -> tuple[PartFile, int]:
        """Open (or create) the ``.part`` file of ``dest``; returns it and the offset to
        continue from, having cut the file to that offset."""
        path = part_path(dest)
        try:
            saved: int | None = path.stat().st_size
        except FileNotFoundError:
            saved = None
        offset = resume_offset(state, saved, resume=resume)
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_BINARY", 0), 0o644)
        file = os.fdopen(descriptor, "r+b")
        try:
            file.truncate(offset)
            file.seek(offset)
        except BaseException:
            file.close()
            raise
        return cls(dest, file), offset

    def begin(self, plan: BodyPlan) -> None:
        """Position for a response body as the download session planned it."""
        if plan.truncate:
            self._file.truncate(plan.offset)
        self._file.seek(plan.offset)

    def write(self, data: bytes) -> None:
        self._file.write(data)

    def sync(self) -> None:
        """Make every byte written so far durable (before a checkpoint claims it)."""
        self._file.flush()
        os.fsync(self._file.fileno())

    def commit(self) -> None:
        """Sync, close and rename the complete file over ``dest``."""
        self.sync()
        self._file.close()
        os.replace(self.path, self.dest)
        _sync_directory(self.dest.parent)

    def discard(self) -> None:
        """Close and delete the partial file (its bytes belong to a replaced version)."""
        self._file.close()
        self.path.unlink(missing_ok=True)

    def close(self) -> None:
        self._file.close()


def _sync_directory(directory: Path) -> None:
    """Make a rename durable on POSIX; a no-op where directories cannot be opened."""
    flags = getattr(os, "O_DIRECTORY", None)
    if flags is None:
        return
    with contextlib.suppress(OSError):
        descriptor = os.open(directory, os.O_RDONLY | flags)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
