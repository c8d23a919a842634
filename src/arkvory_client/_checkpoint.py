"""The checkpoint file of ``arkvoryctl``: how a new process continues the same download.

Next to the output ``FILE`` lives ``FILE.arkvory.json``::

    {"version": 1, "url": "…", "downloadId": "…", "etag": "…", "size": 123,
     "done": 45, "ticket": "2.…"}

It holds the SDK's :class:`~arkvory_client.DownloadState` for that URL: the saved prefix
of ``FILE.part`` (``done``, vouched for by ``etag``) and the download's identity in the
server's queue (``downloadId`` and the last ``ticket``), so a download stopped with
Ctrl-C, a reboot or a crash resumes its bytes *and* its place (R-CLI-1, R-TICKET-1).

It is replaced atomically (a temporary file, synced, then renamed over it), so a crash
leaves either the previous checkpoint or the new one, never half of one; the SDK syncs
the bytes a state counts before reporting it. A checkpoint written before download ids
existed has no ``downloadId``: it is read with a fresh id, which the next write keeps.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ._events import DownloadState, new_download_id

__all__ = [
    "CHECKPOINT_SUFFIX",
    "CHECKPOINT_VERSION",
    "Checkpoint",
    "CheckpointError",
    "checkpoint_document",
    "checkpoint_path",
    "read_checkpoint",
    "remove_checkpoint",
    "write_checkpoint",
]

CHECKPOINT_SUFFIX: Final = ".arkvory.json"
CHECKPOINT_VERSION: Final = 1
_MAX_BYTES: Final = 64 * 1024
_KINDS: Final[dict[type, str]] = {int: "an integer", str: "a string"}


class CheckpointError(ValueError):
    """The checkpoint file exists but cannot be used (not JSON, wrong fields, newer)."""


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A checkpoint as read: the URL it belongs to and the state to continue from.

    ``upgraded`` is true when the file had no ``downloadId`` and ``state`` carries a
    fresh one.
    """

    url: str
    state: DownloadState
    upgraded: bool = False


def checkpoint_path(dest: Path) -> Path:
    """Where the checkpoint of the output file ``dest`` lives."""
    return dest.with_name(dest.name + CHECKPOINT_SUFFIX)


def read_checkpoint(path: Path) -> Checkpoint | None:
    """The checkpoint at ``path``, ``None`` when there is none.

    Raises :class:`CheckpointError` for a file that is not a checkpoint this version can
    read, and ``OSError`` when it cannot be read at all.
    """
    try:
        with path.open("rb") as file:
            raw = file.read(_MAX_BYTES + 1)
    except FileNotFoundError:
        return None
    if len(raw) > _MAX_BYTES:
        raise CheckpointError(f"{path} is too large to be a checkpoint")
    try:
        document = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as error:
        raise CheckpointError(f"{path} is not valid JSON: {error}") from None
    if not isinstance(document, dict):
        raise CheckpointError(f"{path} is not a JSON object")
    return _parse(path, document)


def _parse(path: Path, document: dict[str, Any]) -> Checkpoint:
    version = document.get("version", CHECKPOINT_VERSION)
    if type(version) is not int or version > CHECKPOINT_VERSION or version < 1:
        raise CheckpointError(f"{path} has version {version!r}; this arkvoryctl reads version 1")
    url = _field(path, document, "url", str, required=True)
    download_id = _field(path, document, "downloadId", str)
    etag = _field(path, document, "etag", str)
    size = _field(path, document, "size", int)
    done = _field(path, document, "done", int)
    ticket = _field(path, document, "ticket", str)
    assert isinstance(url, str)
    upgraded = download_id is None
    try:
        state = DownloadState(
            download_id=download_id if isinstance(download_id, str) else new_download_id(),
            etag=etag if isinstance(etag, str) else None,
            size=size if isinstance(size, int) else None,
            done=done if isinstance(done, int) else 0,
            ticket=ticket if isinstance(ticket, str) else None,
        )
    except ValueError as error:
        raise CheckpointError(f"{path}: {error}") from None
    return Checkpoint(url=url, state=state, upgraded=upgraded)


def _field(
    path: Path, document: dict[str, Any], name: str, kind: type, *, required: bool = False
) -> object:
    value = document.get(name)
    if value is None:
        if required:
            raise CheckpointError(f"{path} has no {name!r}")
        return None
    # bool is an int in Python, but never a size or a byte count
    if type(value) is not kind:
        raise CheckpointError(f"{path}: {name!r} must be {_KINDS[kind]}")
    return value


def checkpoint_document(url: str, state: DownloadState) -> dict[str, object]:
    """The JSON object of a checkpoint (version 1)."""
    return {
        "version": CHECKPOINT_VERSION,
        "url": url,
        "downloadId": state.download_id,
        "etag": state.etag,
        "size": state.size,
        "done": state.done,
        "ticket": state.ticket,
    }


def write_checkpoint(path: Path, url: str, state: DownloadState) -> None:
    """Replace the checkpoint at ``path`` atomically: temporary file, fsync, rename."""
    data = json.dumps(checkpoint_document(url, state), indent=2).encode() + b"\n"
    descriptor, temporary = tempfile.mkstemp(
        prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or Path()
    )
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def remove_checkpoint(path: Path) -> None:
    """Delete the checkpoint (the download is complete, or restarts from zero)."""
    path.unlink(missing_ok=True)
