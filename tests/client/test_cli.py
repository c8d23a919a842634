"""``arkvoryctl download`` run in-process against a scripted server on a fake clock.

``main`` takes an ``httpx`` transport, a clock, a sleep and a time zone for exactly this:
a queue of many minutes runs in milliseconds, and the exact lines printed are compared.
Covered: the plain and JSON output of queued → started → completed (R-CLI-1, R-VIS-1),
every exit code, the checkpoint (resume, the same id and ticket in a new process, the
upgrade of an id-less checkpoint), a changed object restarting once, and Ctrl-C.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path
from typing import Any

import httpx
import pytest

from arkvory_client._cli import main
from arkvory_client._cli_parser import EXIT_DEADLINE, EXIT_INTERRUPTED, EXIT_USAGE

from ._support import (
    URL,
    FakeClock,
    ObjectServer,
    Sleeps,
    payload,
    problem,
    queued,
    replaced_by,
    status,
)

MIB = 1024 * 1024
DATA = payload(100_000)


@dataclass
class Outcome:
    code: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.lines]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., Outcome]:
    """Run ``arkvoryctl download URL *args`` against ``server``; capture its output."""

    def run(
        server: ObjectServer, *args: str, url: str = URL, sleeps: Sleeps | None = None
    ) -> Outcome:
        sleeps = sleeps or Sleeps(FakeClock())
        code = main(
            ["download", url, *args],
            transport=httpx.MockTransport(server.handler),
            clock=sleeps.clock,
            sleep=sleeps,
            tz=UTC,
        )
        captured = capsys.readouterr()
        return Outcome(code, captured.out, captured.err)

    return run


def leftovers(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


# ---------------------------------------------------------------------- output
def test_plain_output_queued_then_progress_then_saved(
    cli: Callable[..., Outcome], tmp_path: Path
) -> None:
    server = ObjectServer(DATA).then(queued(position=3), queued(position=3), queued(position=2))
    dest = tmp_path / "image.tar"
    result = cli(server, "-o", str(dest))
    assert result.code == 0, result.err
    assert result.lines == [
        "queued, 3rd, start ≈ 21:00 (in 33 min)",  # once, although answered twice
        "queued, 2nd, start ≈ 21:00 (in 32 min)",
        f"downloading {dest} (97.7 KiB)",
        "97.7 KiB of 97.7 KiB (100 %), 0 B/s",
        f"saved {dest} (97.7 KiB)",
    ]
    assert result.err == ""
    assert dest.read_bytes() == DATA
    assert leftovers(tmp_path) == ["image.tar"]  # the checkpoint is gone


def test_json_output_is_one_object_per_event(cli: Callable[..., Outcome], tmp_path: Path) -> None:
    server = ObjectServer(DATA).then(queued(position=312, retry_after="30"))
    dest = tmp_path / "image.tar"
    result = cli(server, "-o", str(dest), "--json")
    assert result.code == 0, result.err
    events = result.events()
    assert [event["event"] for event in events] == ["queued", "started", "progress", "completed"]
    assert events[0] == {
        "event": "queued",
        "position": 312,
        "startsAt": "2026-05-28T21:00:00Z",
        "earliest": "2026-05-28T21:00:00Z",
        "latest": "2026-05-28T21:00:00Z",
        "startsGuessed": False,
        "retryAfter": 30.0,
        "reason": "download_queued",
        "class": "bulk",
    }
    download_id = server.requests[0].headers["arkvory-download-id"]
    assert events[1] == {
        "event": "started",
        "offset": 0,
        "size": len(DATA),
        "downloadId": download_id,
    }
    assert events[2] == {"event": "progress", "done": len(DATA), "size": len(DATA), "rate": 0.0}
    assert events[3] == {
        "event": "completed",
        "path": str(dest),
        "size": len(DATA),
        "etag": '"v1"',
        "downloadId": download_id,
    }


def test_retries_are_reported(cli: Callable[..., Outcome], tmp_path: Path) -> None:
    server = ObjectServer(DATA).then(status(502))
    result = cli(server, "-o", str(tmp_path / "f"))
    assert result.code == 0
    assert any(
        line.startswith("the server answered 502, retrying in") and line.endswith("(attempt 1)")
        for line in result.lines
    ), result.lines


def test_quiet_prints_nothing(cli: Callable[..., Outcome], tmp_path: Path) -> None:
    server = ObjectServer(DATA).then(queued())
    result = cli(server, "-o", str(tmp_path / "f"), "--quiet")
    assert (result.code, result.out, result.err) == (0, "", "")


# ---------------------------------------------------------------------- exit codes
def test_not_after_exits_4(cli: Callable[..., Outcome], tmp_path: Path) -> None:
    server = ObjectServer(DATA).then(queued(starts_at="2026-05-28T21:00:00Z"))
    result = cli(server, "-o", str(tmp_path / "f"), "--not-after", "2026-05-28T20:50:00Z")
    assert result.code == EXIT_DEADLINE == 4
    assert result.err == (
        "arkvoryctl: the server expects to start at 21:00, after --not-after 20:50\n"
    )
    # The place in the queue stays in the checkpoint for a later try.
    assert "f.arkvory.json" in leftovers(tmp_path)


def test_not_after_as_clock_time_passing_while_queued(
    cli: Callable[..., Outcome], tmp_path: Path
) -> None:
    server = ObjectServer(DATA).then(queued(starts_at=None, retry_after="60"), times=40)
    result = cli(server, "-o", str(tmp_path / "f"), "--not-after", "20:40", "--json")
    assert result.code == 4
    error = result.events()[-1]
    assert error["event"] == "error"
    assert error["code"] == "queue_deadline"
    assert error["notAfter"] == "2026-05-28T20:40:00Z"
    assert error["exitCode"] == 4


def test_http_404_exits_1_with_the_problem_detail(
    cli: Callable[..., Outcome], tmp_path: Path
) -> None:
    server = ObjectServer(DATA).then(problem(404, "not_found", detail="no such file: image.tar"))
    result = cli(server, "-o", str(tmp_path / "image.tar"))
    assert result.code == 1
    assert result.out == ""
    assert result.err.startswith("arkvoryctl: the server answered 404")
    assert "no such file: image.tar" in result.err
    assert leftovers(tmp_path) == []  # no empty .part, no checkpoint


def test_http_404_in_json(cli: Callable[..., Outcome], tmp_path: Path) -> None:
    server = ObjectServer(DATA).then(problem(404, "not_found", detail="no such file"))
    result = cli(server, "-o", str(tmp_path / "image.tar"), "--json")
    assert result.code == 1
    (error,) = result.events()
    assert error["event"] == "error"
    assert (error["code"], error["status"], error["exitCode"]) == ("http_status", 404, 1)
    assert error["problem"]["detail"] == "no such file"
    assert "no such file" in error["message"]


def test_the_wait_limit_exits_1(cli: Callable[..., Outcome], tmp_path: Path) -> None:
    server = ObjectServer(DATA).then(queued(retry_after="30"), times=10)
    result = cli(server, "-o", str(tmp_path / "f"), "--wait-limit", "1m")
    assert result.code == 1
    assert "wait_limit is 60 s" in result.err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--wait-limit", "5x"], "argument --wait-limit: '5x' is not a duration"),
        (["--wait-limit", "-1"], "argument --wait-limit"),
        (["--not-after", "25:99"], "argument --not-after: '25:99' is neither an RFC 3339"),
        (["--not-before", "tomorrow"], "argument --not-before: 'tomorrow' is neither"),
        (
            ["--not-before", "2026-05-28T22:00:00Z", "--not-after", "2026-05-28T21:00:00Z"],
            "--not-before (2026-05-28T22:00:00+00:00) must be before --not-after",
        ),
        (["--class", "urgent"], "argument --class: invalid choice: 'urgent'"),
        (["--quiet", "--json"], "not allowed with argument"),
        (["--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_usage_errors_exit_2(
    cli: Callable[..., Outcome], tmp_path: Path, args: list[str], message: str
) -> None:
    server = ObjectServer(DATA)
    result = cli(server, "-o", str(tmp_path / "f"), *args)
    assert result.code == EXIT_USAGE == 2
    assert message in result.err
    assert "usage: arkvoryctl" in result.err
    assert result.out == ""
    assert server.requests == []


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://host/file", "is not an http(s) URL"),
        ("image.tar", "is not an http(s) URL"),
        ("https://host/files/", "name one with -o FILE"),
    ],
)
def test_unusable_urls_exit_2(cli: Callable[..., Outcome], url: str, message: str) -> None:
    result = cli(ObjectServer(DATA), url=url)
    assert result.code == 2
    assert message in result.err


def test_no_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "required: COMMAND" in capsys.readouterr().err


def test_help_documents_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["download", "--help"]) == 0
    text = capsys.readouterr().out
    assert "exit codes:" in text
    for line in ("0    the file is complete", "4    --not-after", "130  interrupted"):
        assert line in text


def test_the_console_script_is_declared() -> None:
    (entry,) = importlib.metadata.entry_points(group="console_scripts", name="arkvoryctl")
    assert entry.load() is main


# ---------------------------------------------------------------------- requests
def test_token_class_and_default_file_name(
    cli: Callable[..., Outcome], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ARKVORY_TOKEN", "from-env")
    server = ObjectServer(DATA)
    url = "https://arkvory.test/files/my%20image.tar?version=2"
    assert cli(server, "--token", "secret", "--class", "bulk", url=url).code == 0
    assert (tmp_path / "my image.tar").read_bytes() == DATA
    request = server.requests[0]
    assert request.headers["authorization"] == "Bearer secret"
    assert request.headers["arkvory-download-class"] == "bulk"

    other = ObjectServer(DATA)
    assert cli(other, "-o", "second.bin").code == 0
    assert other.requests[0].headers["authorization"] == "Bearer from-env"
    assert "arkvory-download-class" not in other.requests[0].headers


# ---------------------------------------------------------------------- checkpoints
def test_ctrl_c_keeps_the_checkpoint_and_a_new_run_keeps_the_place(
    cli: Callable[..., Outcome], tmp_path: Path
) -> None:
    """SIGINT while queued: exit 130, the checkpoint holds id and ticket; the next run
    sends both, so the server puts it back at its old arrival time (R-TICKET-1)."""
    ticket = "2.k1.k2.signature"
    server = ObjectServer(DATA).then(queued(ticket=ticket), times=5)
    sleeps = Sleeps(FakeClock())
    sleeps.hook = lambda step, seconds: os.kill(os.getpid(), signal.SIGINT) if step == 2 else None
    handler_before = signal.getsignal(signal.SIGINT)
    dest = tmp_path / "image.tar"

    stopped = cli(server, "-o", str(dest), sleeps=sleeps)
    assert stopped.code == EXIT_INTERRUPTED == 130
    assert "interrupted; run the same command to continue" in stopped.err
    assert signal.getsignal(signal.SIGINT) is handler_before
    saved = json.loads((tmp_path / "image.tar.arkvory.json").read_text())
    first_id = server.requests[0].headers["arkvory-download-id"]
    assert saved["downloadId"] == first_id
    assert saved["ticket"] == ticket
    assert saved["url"] == URL

    asked = len(server.requests)
    server.script.clear()
    resumed = cli(server, "-o", str(dest))
    assert resumed.code == 0, resumed.err
    again = server.requests[asked]
    assert again.headers["arkvory-download-id"] == first_id
    assert again.headers["arkvory-queue-ticket"] == ticket
    assert dest.read_bytes() == DATA
    assert leftovers(tmp_path) == ["image.tar"]


def test_a_new_run_resumes_the_saved_bytes(cli: Callable[..., Outcome], tmp_path: Path) -> None:
    dest = tmp_path / "image.tar"
    (tmp_path / "image.tar.part").write_bytes(DATA[:40_000])
    (tmp_path / "image.tar.arkvory.json").write_text(
        json.dumps(
            {
                "version": 1,
                "url": URL,
                "downloadId": "kept-id",
                "etag": '"v1"',
                "size": len(DATA),
                "done": 40_000,
                "ticket": None,
            }
        )
    )
    server = ObjectServer(DATA)
    result = cli(server, "-o", str(dest), "--json")
    assert result.code == 0, result.err
    events = result.events()
    assert events[0] == {
        "event": "resumed",
        "downloadId": "kept-id",
        "done": 40_000,
        "size": len(DATA),
        "upgraded": False,
    }
    assert events[1]["offset"] == 40_000
    request = server.requests[0]
    assert request.headers["range"].startswith("bytes=40000-")
    assert request.headers["if-range"] == '"v1"'
    assert request.headers["arkvory-download-id"] == "kept-id"
    assert dest.read_bytes() == DATA


def test_an_old_checkpoint_gets_an_id_on_first_use(
    cli: Callable[..., Outcome], tmp_path: Path
) -> None:
    dest = tmp_path / "image.tar"
    checkpoint = tmp_path / "image.tar.arkvory.json"
    (tmp_path / "image.tar.part").write_bytes(DATA[:40_000])
    checkpoint.write_text(
        json.dumps({"url": URL, "etag": '"v1"', "size": len(DATA), "done": 40_000})
    )
    server = ObjectServer(DATA)
    on_disk: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        on_disk.append(json.loads(checkpoint.read_text()))
        return server.handler(request)

    code = main(
        ["download", URL, "-o", str(dest)],
        transport=httpx.MockTransport(handler),
        clock=FakeClock(),
        sleep=Sleeps(FakeClock()),
        tz=UTC,
    )
    assert code == 0
    sent = server.requests[0].headers["arkvory-download-id"]
    # Before the first request the checkpoint already holds the new id (version 1).
    assert on_disk[0]["downloadId"] == sent
    assert on_disk[0]["version"] == 1
    assert server.requests[0].headers["range"].startswith("bytes=40000-")
    assert dest.read_bytes() == DATA


def test_a_checkpoint_of_another_url_or_unreadable_is_set_aside(
    cli: Callable[..., Outcome], tmp_path: Path
) -> None:
    dest = tmp_path / "image.tar"
    checkpoint = tmp_path / "image.tar.arkvory.json"
    checkpoint.write_text(json.dumps({"url": "https://elsewhere/x", "downloadId": "other"}))
    server = ObjectServer(DATA)
    result = cli(server, "-o", str(dest))
    assert result.code == 0
    assert "belongs to https://elsewhere/x; starting a new download" in result.err
    assert server.requests[0].headers["arkvory-download-id"] != "other"

    checkpoint.write_text("{broken")
    result = cli(ObjectServer(DATA), "-o", str(dest))
    assert result.code == 0
    assert "warning: ignoring the checkpoint" in result.err


def test_a_changed_object_restarts_from_zero_once(
    cli: Callable[..., Outcome], tmp_path: Path
) -> None:
    dest = tmp_path / "image.tar"
    (tmp_path / "image.tar.part").write_bytes(b"x" * 40_000)
    (tmp_path / "image.tar.arkvory.json").write_text(
        json.dumps(
            {"url": URL, "downloadId": "same", "etag": '"v0"', "size": len(DATA), "done": 40_000}
        )
    )
    server = ObjectServer(DATA, etag='"v1"')
    result = cli(server, "-o", str(dest))
    assert result.code == 0, result.err
    assert any(
        line.startswith("the file changed on the server")
        and line.endswith("; starting again from zero")
        for line in result.lines
    ), result.lines
    assert dest.read_bytes() == DATA
    # The same download (and place) throughout; only the bytes start over.
    assert set(server.header_values("arkvory-download-id")) == {"same"}
    assert server.requests[-1].headers["range"].startswith("bytes=0-")
    assert leftovers(tmp_path) == ["image.tar"]


def test_an_object_changing_again_fails(cli: Callable[..., Outcome], tmp_path: Path) -> None:
    big = payload(9 * MIB, seed=1)
    server = ObjectServer(big).then(
        lambda s, request: s.serve(request),
        replaced_by(payload(9 * MIB, seed=2), '"v2"'),
        lambda s, request: s.serve(request),
        replaced_by(payload(9 * MIB, seed=3), '"v3"'),
    )
    result = cli(server, "-o", str(tmp_path / "image.tar"), "--json")
    assert result.code == 1
    kinds = [event["event"] for event in result.events()]
    assert kinds.count("restarted") == 1
    assert result.events()[-1]["code"] == "object_changed"
    assert leftovers(tmp_path) == []


def test_not_before_is_announced_then_waited(cli: Callable[..., Outcome], tmp_path: Path) -> None:
    sleeps = Sleeps(FakeClock())
    server = ObjectServer(DATA)
    result = cli(server, "-o", str(tmp_path / "f"), "--not-before", "21:00", sleeps=sleeps)
    assert result.code == 0
    assert result.lines[0] == "not asking before 21:00 (in 33 min)"
    assert sleeps.total >= 33 * 60  # nothing was asked before then
    assert len(server.requests) == 1

    later = cli(ObjectServer(DATA), "-o", str(tmp_path / "g"), "--not-before", "21:00", "--json")
    assert later.events()[0] == {
        "event": "waiting",
        "reason": "not_before",
        "until": "2026-05-28T21:00:00Z",
    }
