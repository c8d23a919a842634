"""The gate's curl clients: Debian's ``curl`` downloading as people and scripts do.

Every download is one or two real ``curl`` processes without ``Arkvory-Download-Id``, so
the server keys its session by the client address (R-SESS-2); each download binds its
own loopback address (``--interface 127.1.x.y``), as each machine of a crowd has its own.
The kinds:

- ``whole``: ``curl -o FILE URL``, the whole file in one response;
- ``resume``: ``--range 0-N`` (a transfer cut short), a second later ``-C -`` (the rest);
- ``tail``: ``--range -65536`` (a ZIP's central directory), then the whole file;
- ``slow``: the whole file with ``--limit-rate`` (a client that takes a tenth of its share).

Each runs ``--fail --retry 1000 --retry-all-errors --retry-max-time T``: on a ``503``
curl 7.88 sleeps ``Retry-After`` seconds when the answer has one (doubling backoff from
1 s otherwise), and gives up when a ``Retry-After`` would take it past ``T``; with
``--fail`` no problem body is written into the file. ``-v --trace-time`` logs
every attempt with microsecond times: each request, the status and headers of each
answer (``Retry-After``, ``Arkvory-Starts-At`` with its interval,
``Arkvory-Queue-Position``), so the record holds what curl was told and when, not what
the server meant to say. The first byte is the first ``2xx`` status line (the SDK's
``Started`` is its response head too); the end is the last process's exit. The bytes are
checked against the served file (size and SHA-256; a tail read against its last bytes),
then deleted.

Run: ``python -m benchmarks._gate_curl SPEC OUT.json`` where the JSON spec holds ``url``,
``token``, ``origin`` (epoch seconds), ``downloads`` (each ``arrival``, ``kind``,
``address`` and for ``resume`` the ``cut``), ``directory``, ``file`` (the served file's
path, to check against), ``limit_rate`` (bytes per second), ``tail_bytes``, ``pause``
(seconds between a resume's two processes) and ``retry_max_time``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = ["Attempt", "parse_log", "starts_at"]

CURL = "/usr/bin/curl"
Attempt = dict[str, Any]
"""One request curl made: ``at`` (sent), then from its answer ``status``, ``answered``,
``retry_after``, ``starts_at`` ((point, earliest, latest) epoch seconds), ``guessed``
(the start on a guessed rate, ``basis=guess``, ADR 0042) and ``position``; a request
with no answer (refused, reset) has ``status`` ``None``."""


def _of_day(clock: str) -> float | None:
    """``HH:MM:SS.ffffff`` as seconds of the day; ``None`` for a line without one."""
    parts = clock.split(":")
    if len(parts) != 3 or not all(part.replace(".", "", 1).isdigit() for part in parts):
        return None
    return int(parts[0]) * 3600 + int(parts[1]) * 60 + float(parts[2])


def _parameters(value: str) -> tuple[str, dict[str, str]]:
    """``Arkvory-Starts-At``'s point and its ``name=value`` parameters."""
    point, *fields = (part.strip() for part in value.split(";"))
    return point, dict(field.partition("=")[::2] for field in fields)


def starts_at(value: str) -> tuple[float, float, float]:
    """``Arkvory-Starts-At: <RFC 3339>; earliest=<...>; latest=<...>`` as epoch seconds."""
    point, found = _parameters(value)

    def parse(text: str) -> float:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()

    at = parse(point)
    return at, parse(found.get("earliest", point)), parse(found.get("latest", point))


def parse_log(text: str, began: float) -> list[Attempt]:
    """Every attempt of one curl process, from its ``-v --trace-time`` log, in epoch seconds.

    curl's ``--trace-time`` is its monotonic clock plus an offset taken once in whole
    seconds, so its times of day are exact between themselves but up to a second off the
    wall clock. They are set on it by the first line, taken as written when the process
    was started (``began``): early by the few milliseconds curl takes to start.
    """
    lines = [line.rstrip("\r").partition(" ")[::2] for line in text.splitlines()]
    stamped = [(of_day, rest) for clock, rest in lines if (of_day := _of_day(clock)) is not None]
    if not stamped:
        return []
    first = stamped[0][0]
    attempts: list[Attempt] = []
    for of_day, rest in stamped:
        at = began + (of_day - first) % 86400  # a process's lines may pass midnight
        if rest.startswith("> ") and rest[2:].split(" ", 1)[0] in ("GET", "HEAD"):
            attempts.append({"at": at, "status": None})
        elif not attempts or not rest.startswith("< "):
            continue
        elif rest.startswith("< HTTP/"):
            attempts[-1] |= {"status": int(rest.split()[2]), "answered": at}
            attempts[-1] |= {"retry_after": None, "starts_at": None, "position": None}
            attempts[-1]["guessed"] = False
        elif attempts[-1]["status"] is not None:
            name, _, value = rest[2:].partition(":")
            name, value = name.strip().lower(), value.strip()
            if name == "retry-after" and value.isdigit():
                attempts[-1]["retry_after"] = int(value)
            elif name == "arkvory-starts-at":
                attempts[-1]["starts_at"] = starts_at(value)
                attempts[-1]["guessed"] = _parameters(value)[1].get("basis") == "guess"
            elif name == "arkvory-queue-position" and value.isdigit():
                attempts[-1]["position"] = int(value)
    return attempts


def _steps(spec: dict[str, Any], download: dict[str, Any], dest: Path) -> list[list[str]]:
    """The curl command lines of one download, in order."""
    whole = ["-o", str(dest)]
    if download["kind"] == "resume":
        return [["--range", f"0-{download['cut'] - 1}", *whole], ["-C", "-", *whole]]
    if download["kind"] == "tail":
        tail = dest.with_suffix(".tail")
        return [["--range", f"-{spec['tail_bytes']}", "-o", str(tail)], whole]
    if download["kind"] == "slow":
        return [["--limit-rate", str(spec["limit_rate"]), *whole]]
    return [whole]


def _digest(path: Path, tail: int | None = None) -> tuple[int, str]:
    data = path.read_bytes() if path.exists() else b""
    return len(data), hashlib.sha256(data[-tail:] if tail else data).hexdigest()


async def _one(spec: dict[str, Any], index: int, served: bytes, digest: str) -> dict[str, Any]:
    download = spec["downloads"][index]
    record: dict[str, Any] = dict.fromkeys(("estimate", "earliest", "latest", "start", "end"))
    record |= {"kind": download["kind"], "positions": [], "failures": 0, "error": None}
    dest = Path(spec["directory"]) / f"{index}.bin"
    common = ["-sS", "-v", "--trace-time", "--fail", "--retry", "1000", "--retry-all-errors"]
    common += ["--retry-max-time", str(spec["retry_max_time"]), "--interface", download["address"]]
    common += ["-H", f"Authorization: Bearer {spec['token']}"]
    await asyncio.sleep(max(0.0, spec["origin"] + download["arrival"] - time.time()))
    record["arrival"] = time.time()
    attempts: list[Attempt] = []
    exits: list[int] = []
    for number, step in enumerate(_steps(spec, download, dest)):
        if number and download["kind"] == "resume":
            await asyncio.sleep(spec["pause"])
        log = dest.with_suffix(f".{number}.log")
        began = time.time()
        process = await asyncio.create_subprocess_exec(
            CURL,
            *common,
            "--stderr",
            str(log),
            *step,
            spec["url"],
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            env={**os.environ, "TZ": "UTC"},  # times of day without a daylight-saving jump
        )
        exits.append(await process.wait())
        attempts += parse_log(log.read_text(encoding="utf-8", errors="replace"), began)
        log.unlink(missing_ok=True)
    record["stop"] = time.time()
    record |= {"attempts": attempts, "exits": exits, "queued": 0}
    for attempt in attempts:
        status = attempt["status"]
        if status is not None and 200 <= status < 300:
            record["start"] = attempt["answered"]
            break
        if status == 503 and attempt["starts_at"] is not None:
            record["queued"] += 1
            if attempt["position"] is None:  # a newcomer's placeholder answer (R-EST-3)
                continue
            record["positions"].append((attempt["answered"], attempt["position"]))
            point, earliest, latest = attempt["starts_at"]
            if record["earliest"] is None:  # the first answer's interval is judged
                record["earliest"], record["latest"] = earliest, latest
            if record["estimate"] is None and not attempt["guessed"]:  # ADR 0042
                record["estimate"] = point
        else:
            record["failures"] += 1
    size, got = await asyncio.to_thread(_digest, dest)
    record["bytes_ok"] = size == len(served) and got == digest
    if download["kind"] == "tail":
        tail = spec["tail_bytes"]
        _, tail_digest = await asyncio.to_thread(_digest, dest.with_suffix(".tail"), tail)
        record["bytes_ok"] &= tail_digest == hashlib.sha256(served[-tail:]).hexdigest()
        dest.with_suffix(".tail").unlink(missing_ok=True)
    dest.unlink(missing_ok=True)
    if all(code == 0 for code in exits) and record["bytes_ok"]:
        record["outcome"], record["end"] = "finished", record["stop"]
    elif exits[-1] == 22:  # the last answer an HTTP error: retries or their time ran out
        record["outcome"], record["error"] = "gave_up", f"curl exits {exits}"
    else:
        record["outcome"] = "failed"
        record["error"] = f"curl exits {exits}, bytes {'right' if record['bytes_ok'] else 'wrong'}"
    return record


async def _main(spec: dict[str, Any], out: str) -> None:
    Path(spec["directory"]).mkdir(parents=True, exist_ok=True)
    served = Path(spec["file"]).read_bytes()
    digest = hashlib.sha256(served).hexdigest()
    records = await asyncio.gather(
        *(_one(spec, index, served, digest) for index in range(len(spec["downloads"])))
    )
    shutil.rmtree(spec["directory"], ignore_errors=True)
    with open(out, "w", encoding="utf-8") as file:
        json.dump(records, file)


if __name__ == "__main__":
    asyncio.run(_main(json.loads(sys.argv[1]), sys.argv[2]))
