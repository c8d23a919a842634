"""The checkpoint file ``FILE.arkvory.json``: its format, atomic replacement, and the
upgrade of checkpoints written before download ids existed (R-CLI-1)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from arkvory_client import DownloadState
from arkvory_client._checkpoint import (
    CheckpointError,
    checkpoint_path,
    read_checkpoint,
    remove_checkpoint,
    write_checkpoint,
)

URL = "https://arkvory.test/files/image.tar"


def test_the_checkpoint_lives_next_to_the_output(tmp_path: Path) -> None:
    assert checkpoint_path(tmp_path / "image.tar") == tmp_path / "image.tar.arkvory.json"


def test_written_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "image.tar.arkvory.json"
    state = DownloadState(download_id="abc", etag='"v1"', size=100, done=40, ticket="2.a.b.c")
    write_checkpoint(path, URL, state)
    assert json.loads(path.read_text()) == {
        "version": 1,
        "url": URL,
        "downloadId": "abc",
        "etag": '"v1"',
        "size": 100,
        "done": 40,
        "ticket": "2.a.b.c",
    }
    found = read_checkpoint(path)
    assert found is not None
    assert (found.url, found.state, found.upgraded) == (URL, state, False)
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left


def test_a_missing_checkpoint_is_none(tmp_path: Path) -> None:
    assert read_checkpoint(tmp_path / "nothing.arkvory.json") is None
    remove_checkpoint(tmp_path / "nothing.arkvory.json")  # removing twice is fine


def test_an_old_checkpoint_without_an_id_gets_one(tmp_path: Path) -> None:
    path = tmp_path / "old.arkvory.json"
    path.write_text(json.dumps({"url": URL, "etag": '"v1"', "size": 100, "done": 40}))
    found = read_checkpoint(path)
    assert found is not None and found.upgraded
    assert found.state.download_id  # a fresh id …
    assert (found.state.etag, found.state.size, found.state.done) == ('"v1"', 100, 40)
    again = read_checkpoint(path)
    assert again is not None and again.state.download_id != found.state.download_id
    # … which is kept once written back
    write_checkpoint(path, URL, found.state)
    kept = read_checkpoint(path)
    assert kept is not None and not kept.upgraded
    assert kept.state.download_id == found.state.download_id


def test_replacement_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure before the rename leaves the previous checkpoint whole and no litter."""
    path = tmp_path / "image.tar.arkvory.json"
    first = DownloadState(download_id="abc", done=0)
    write_checkpoint(path, URL, first)

    def broken_replace(source: object, target: object) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk gone"):
        write_checkpoint(path, URL, DownloadState(download_id="abc", etag='"v"', size=9, done=5))
    monkeypatch.undo()
    found = read_checkpoint(path)
    assert found is not None and found.state == first
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "not a JSON object"),
        (json.dumps({"version": 2, "url": URL}), "version 2"),
        (json.dumps({"version": "1", "url": URL}), "version"),
        (json.dumps({"version": 1}), "no 'url'"),
        (json.dumps({"url": URL, "done": "40"}), "'done' must be an integer"),
        (json.dumps({"url": URL, "done": True}), "'done' must be an integer"),
        (json.dumps({"url": URL, "downloadId": 7}), "'downloadId' must be a string"),
        (json.dumps({"url": URL, "size": 10, "done": 40}), "done must be between"),
        (json.dumps({"url": URL, "downloadId": "é"}), "printable ASCII"),
    ],
)
def test_unusable_checkpoints_are_reported(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.arkvory.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(CheckpointError, match=message):
        read_checkpoint(path)
