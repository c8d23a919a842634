"""``arkvory-demo``: run the demo artifact server, or create files for it to serve.

``serve`` is the quickest way to see the scheduler at work: point it at a directory,
cap the bandwidth so that loopback behaves like a busy link, and download with curl,
wget or ``arkvoryctl`` from several terminals. ``example`` creates a directory with a
mix of objects below and above the session threshold (16 MiB) and a ZIP archive, whose
central directory at the end exercises tail reads (R-SESS-8).

Exit codes: 0 success, 1 the server could not start (e.g. the port is taken), 2 bad
usage or configuration (the message names the option or environment variable), 130
stopped with Ctrl+C after a graceful shutdown.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import random
import secrets
import sys
import zipfile
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Final, TextIO

import uvicorn

from arkvory_sched import DownloadScheduler

from .._exceptions import SettingsError
from .._version import installed_version
from ..api import API_PREFIX, Identity, Role
from ..postgres import DEFAULT_SCHEMA
from ..settings import SchedulerSettings, UnparsableError, parse_rate, parse_size
from ._app import build_app
from ._auth import Principal, parse_staff_token, parse_tokens

__all__ = ["ExampleFile", "build_parser", "create_example", "example_files", "main"]

PROG: Final = "arkvory-demo"
EXIT_OK: Final = 0
EXIT_START_FAILED: Final = 1
EXIT_USAGE: Final = 2
EXIT_INTERRUPTED: Final = 130

MIB: Final = 1024 * 1024
_WRITE_CHUNK: Final = MIB
_DEFAULT_LARGE_FILES: Final = 2
_FIRST_LARGE_SIZE: Final = 48 * MIB
_LARGE_SIZE_STEP: Final = 16 * MIB
_MAX_LARGE_FILES: Final = 1000
OPERATOR_TOKEN_VARIABLE: Final = "ARKVORY_DEMO_OPERATOR_TOKEN"
VIEWER_TOKEN_VARIABLE: Final = "ARKVORY_DEMO_VIEWER_TOKEN"
_STAFF_VARIABLES: Final[dict[Role, str]] = {
    "operator": OPERATOR_TOKEN_VARIABLE,
    "viewer": VIEWER_TOKEN_VARIABLE,
}


class ExampleFile:
    """One file of the example directory: a name, a size and a seed for its bytes."""

    __slots__ = ("name", "size")

    def __init__(self, name: str, size: int) -> None:
        self.name = name
        self.size = size

    def __repr__(self) -> str:
        return f"ExampleFile({self.name!r}, {self.size})"


def example_files(
    large_files: int = _DEFAULT_LARGE_FILES, size: int | None = None
) -> list[ExampleFile]:
    """The pseudo-random files of the example directory (the text and ZIP files aside).

    Three small binaries stay below the session threshold; ``large_files`` larger ones
    are 48 MiB, 64 MiB, 80 MiB, … or all ``size`` bytes when a size is given.
    """
    files = [
        ExampleFile("small/tool-256KiB.bin", 256 * 1024),
        ExampleFile("small/plugin-2MiB.bin", 2 * MIB),
        ExampleFile("small/patch-12MiB.bin", 12 * MIB),
    ]
    for index in range(large_files):
        length = size if size is not None else _FIRST_LARGE_SIZE + index * _LARGE_SIZE_STEP
        files.append(ExampleFile(f"large/image-{index + 1}.bin", length))
    return files


_README: Final = """\
Example files for the arkvory demo artifact server.

small/  objects below ARKVORY_DOWNLOAD_SESSION_MIN_BYTES (16 MiB): admitted per request
large/  objects above it: each download is one session in the queue
bundle.zip  a small archive; unzip-style readers fetch its end first (a tail read)

Serve them with:  arkvory-demo serve <this directory> --bandwidth 40MB
"""


def _zip_bytes() -> bytes:
    """A small ZIP archive whose bytes depend on nothing but this code (fixed timestamps)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        members = {
            "bundle/README.txt": _README.encode(),
            "bundle/data.bin": random.Random("bundle/data.bin").randbytes(64 * 1024),
        }
        for name, data in members.items():
            info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, data)
    return buffer.getvalue()


def create_example(
    directory: Path,
    *,
    large_files: int = _DEFAULT_LARGE_FILES,
    size: int | None = None,
    out: TextIO | None = None,
) -> list[tuple[Path, bool]]:
    """Create the example directory; return each file with whether it was (re)written.

    Idempotent: a file that already has the expected size (or, for the small text and
    ZIP files, the expected bytes) is left alone, so its mtime — and with it the ETag
    clients resume against — survives a second run. Files are written to a temporary
    name and renamed, so an interrupted run never leaves a short file with the final
    name. Contents are deterministic pseudo-random bytes, written in 1 MiB chunks.
    """
    directory.mkdir(parents=True, exist_ok=True)
    results: list[tuple[Path, bool]] = []
    for name, data in (("README.txt", _README.encode()), ("bundle.zip", _zip_bytes())):
        path = directory / name
        results.append((path, _write_bytes(path, data)))
    for spec in example_files(large_files, size):
        path = directory / spec.name
        results.append((path, _write_random(path, spec)))
    if out is not None:
        for path, written in results:
            verb = "created" if written else "kept   "
            out.write(f"{verb} {path.relative_to(directory)} ({path.stat().st_size:,} bytes)\n")
    return results


def _write_bytes(path: Path, data: bytes) -> bool:
    try:
        if path.read_bytes() == data:
            return False
    except OSError:
        pass
    temporary = path.with_name(f".{path.name}.partial")
    temporary.write_bytes(data)
    os.replace(temporary, path)
    return True


def _write_random(path: Path, spec: ExampleFile) -> bool:
    try:
        if path.is_file() and path.stat().st_size == spec.size:
            return False
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    generator = random.Random(spec.name)
    temporary = path.with_name(f".{path.name}.partial")
    with temporary.open("wb") as file:
        remaining = spec.size
        while remaining > 0:
            length = min(_WRITE_CHUNK, remaining)
            file.write(generator.randbytes(length))
            remaining -= length
    os.replace(temporary, path)
    return True


# --- argument parsing --------------------------------------------------------------------


def _byte_count(text: str, *, rate: bool) -> int:
    try:
        value = parse_rate(text) if rate else parse_size(text)
    except UnparsableError as error:
        raise argparse.ArgumentTypeError(f"{text!r}: expected {error.expected}") from None
    return value


def _bandwidth(text: str) -> int:
    value = _byte_count(text, rate=True)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: the bandwidth must be positive")
    return value


def _size(text: str) -> int:
    value = _byte_count(text, rate=False)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: the size must be positive")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r}: a port is between 0 and 65535")
    return value


def _lease_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected seconds, e.g. 10") from None
    if not 1.0 <= value <= 3600.0:
        raise argparse.ArgumentTypeError(f"{text!r}: a lease lasts 1 to 3600 seconds")
    return value


def _file_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number") from None
    if not 0 <= value <= _MAX_LARGE_FILES:
        raise argparse.ArgumentTypeError(f"{text!r}: between 0 and {_MAX_LARGE_FILES}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Demo artifact server for the arkvory download scheduler.",
        epilog="Scheduler settings come from ARKVORY_* environment variables.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {installed_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser("serve", help="serve the files of a directory")
    serve.add_argument("directory", metavar="DIR", type=Path, help="directory to serve")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1)")
    serve.add_argument("--port", type=_port, default=8000, help="port to bind (8000)")
    serve.add_argument(
        "--bandwidth",
        type=_bandwidth,
        metavar="BYTES_PER_SECOND",
        help="cap all downloads together at this rate, e.g. 40MB or 40MiB (default: no cap)",
    )
    serve.add_argument(
        "--token",
        action="append",
        default=[],
        metavar="TOKEN=PRINCIPAL:KIND",
        help="accept 'Authorization: Bearer TOKEN' as PRINCIPAL of KIND person, service or "
        "link (repeatable); requests without a token are the anonymous link",
    )
    for role, variable in _STAFF_VARIABLES.items():
        serve.add_argument(
            f"--{role}-token",
            action="append",
            metavar="TOKEN=NAME",
            help=f"accept 'Authorization: Bearer TOKEN' on the operator API ({API_PREFIX}) "
            f"as {role} NAME (repeatable; default: ${variable}, else a random token printed "
            "at start)",
        )

    serve.add_argument(
        "--dsn",
        default=os.environ.get("ARKVORY_DATABASE_URL") or None,
        metavar="URL",
        help="share one queue in PostgreSQL with every server on the same database, e.g. "
        "postgresql://user@host/db (default: $ARKVORY_DATABASE_URL; none: in memory)",
    )
    serve.add_argument(
        "--schema",
        default=DEFAULT_SCHEMA,
        help=f"PostgreSQL schema of the shared queue (default {DEFAULT_SCHEMA})",
    )
    serve.add_argument(
        "--lease-seconds",
        type=_lease_seconds,
        default=10.0,
        metavar="SECONDS",
        help="with --dsn: how long a slot lease lasts without renewal (default 10)",
    )
    serve.add_argument(
        "--gateway",
        action="store_true",
        help="a read gateway, which neither migrates nor creates the ticket key; needs --dsn "
        "(a gateway with a queue of its own would lose queue positions)",
    )

    example = commands.add_parser("example", help="create an example directory to serve")
    example.add_argument("directory", metavar="DIR", type=Path, help="directory to fill")
    example.add_argument(
        "--files",
        type=_file_count,
        default=_DEFAULT_LARGE_FILES,
        metavar="N",
        help="number of large files (default 2)",
    )
    example.add_argument(
        "--size",
        type=_size,
        metavar="BYTES",
        help="size of each large file, e.g. 40MB (default 48 MiB, 64 MiB, 80 MiB, ...)",
    )
    return parser


def _fail(message: str) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``arkvory-demo``; returns the exit code instead of exiting."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help, or a usage error already printed
        return exit_.code if isinstance(exit_.code, int) else EXIT_USAGE
    if args.command == "example":
        return _example(args)
    return _serve(args)


def _example(args: argparse.Namespace) -> int:
    directory: Path = args.directory
    if directory.exists() and not directory.is_dir():
        return _fail(f"{directory} exists and is not a directory")
    try:
        create_example(directory, large_files=args.files, size=args.size, out=sys.stdout)
    except OSError as error:
        return _fail(f"cannot create the example in {directory}: {error}")
    print(f"serve it with: {PROG} serve {directory}")
    return EXIT_OK


class DrainingServer(uvicorn.Server):
    """uvicorn, closing the scheduler the moment a shutdown signal arrives.

    uvicorn runs the application's lifespan shutdown only after open requests finish,
    so held and waiting clients would wait out their hold instead of hearing at once
    that the server is going away (R-RES-4).
    """

    def __init__(self, config: uvicorn.Config, scheduler: DownloadScheduler) -> None:
        super().__init__(config)
        self._scheduler = scheduler
        self._closing: set[asyncio.Task[None]] = set()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is not None:
            loop.call_soon_threadsafe(self._start_closing)
        super().handle_exit(sig, frame)

    def _start_closing(self) -> None:
        task = asyncio.ensure_future(self._scheduler.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)


def _serve(args: argparse.Namespace) -> int:
    if args.gateway and args.dsn is None:
        # Behind a load balancer a client's ranges reach different processes: a queue
        # per process would grant slots the others do not see and lose positions
        # (R-PG-4). Refuse rather than run the per-process queue silently.
        return _fail(
            "--gateway needs the shared queue: read gateways behind a load balancer must "
            "share one queue, or each would keep its own slots and queue positions "
            "(R-PG-4); pass --dsn URL (or set ARKVORY_DATABASE_URL) with the database "
            "the writer uses, or leave out --gateway to run a single server"
        )
    directory: Path = args.directory
    if not directory.is_dir():
        return _fail(f"{directory} is not a directory")
    try:
        tokens: dict[str, Principal] = parse_tokens(args.token)
    except ValueError as error:
        return _fail(f"--token: {error}")
    try:
        staff = _staff(args.operator_token, "operator") | _staff(args.viewer_token, "viewer")
    except ValueError as error:
        return _fail(f"--operator-token/--viewer-token: {error}")
    try:
        settings = SchedulerSettings.from_env()
        app = build_app(
            directory,
            tokens,
            args.bandwidth,
            settings,
            database_url=args.dsn,
            schema=args.schema,
            writer=not args.gateway,
            lease_seconds=args.lease_seconds,
            staff=staff,
        )
    except SettingsError as error:  # ConfigurationError names the variable
        return _fail(str(error))

    _print_staff(staff, f"http://{args.host}:{args.port}{API_PREFIX}")
    config = uvicorn.Config(app, host=args.host, port=args.port, lifespan="on", log_level="info")
    server = DrainingServer(config, app.state.scheduler)
    try:
        server.run()
    except KeyboardInterrupt:
        # uvicorn re-raises Ctrl+C after its graceful shutdown; it has been handled.
        return EXIT_INTERRUPTED
    except SystemExit as exit_:  # uvicorn exits when it cannot bind or start up
        return EXIT_START_FAILED if exit_.code else EXIT_OK
    return EXIT_OK if server.started else EXIT_START_FAILED


def _staff(values: Sequence[str] | None, role: Role) -> dict[str, Identity]:
    """The staff tokens of one role: the options, else the variable, else a random one,
    so the operator API of a demo is usable at once and still never open."""
    if not values:
        from_env = os.environ.get(_STAFF_VARIABLES[role], "").strip()
        values = [from_env] if from_env else []
    if not values:
        values = [f"{secrets.token_urlsafe(18)}=demo-{role}"]
    return dict(parse_staff_token(value, role) for value in values)


def _print_staff(staff: dict[str, Identity], url: str) -> None:
    print(f"operator API: {url}/settings and {url}/state", flush=True)
    for token, identity in staff.items():
        print(f"  {identity.role} token for {identity.name}: {token}", flush=True)
