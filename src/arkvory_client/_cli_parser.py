"""The command line of ``arkvoryctl``: its options, their formats and its exit codes.

Everything a user types is checked here and in :mod:`._cli_job` before a request is
sent, so a mistake ends with exit 2 and the usage line rather than a failed download;
the exit codes live here because ``--help`` documents them.
"""

from __future__ import annotations

import argparse
import math
import re
import urllib.parse
from typing import Final

from ._checkpoint import CHECKPOINT_SUFFIX
from ._render import PROG
from ._version import installed_version

__all__ = [
    "CLASSES",
    "EXIT_DEADLINE",
    "EXIT_FAILURE",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "TOKEN_ENV",
    "build_parser",
    "output_name",
    "parse_duration",
]

EXIT_OK: Final = 0
EXIT_FAILURE: Final = 1
EXIT_USAGE: Final = 2
EXIT_DEADLINE: Final = 4
EXIT_INTERRUPTED: Final = 130

CLASSES: Final = ("interactive", "release", "bulk", "background")
"""The built-in download classes (R-CLASS-1); a client may only lower its own."""
TOKEN_ENV: Final = "ARKVORY_TOKEN"

_EPILOG: Final = f"""\
DURATION: 90s, 15m, 2h, 1h30m, 1d, or plain seconds.
TIME: RFC 3339 (2026-05-28T21:00:00Z) or HH:MM local time (its next occurrence).
The token is sent as "Authorization: Bearer TOKEN"; without --token, ${TOKEN_ENV} is used.

Next to FILE the download keeps FILE.part and the checkpoint FILE{CHECKPOINT_SUFFIX};
running the same command again continues the download in the same place in the queue.

exit codes:
  {EXIT_OK}    the file is complete
  {EXIT_FAILURE}    failure: HTTP error, retries exhausted, --wait-limit used up, file system
  {EXIT_USAGE}    usage: bad option, duration, time, class or URL
  {EXIT_DEADLINE}    --not-after: the download would not start before the deadline
  {EXIT_INTERRUPTED}  interrupted (Ctrl-C); the checkpoint is kept to continue later
"""

_DURATION: Final = re.compile(
    r"(?:(?P<d>\d+)d)?(?:(?P<h>\d+)h)?(?:(?P<m>\d+)m)?(?:(?P<s>\d+(?:\.\d+)?)s)?"
)
_SECONDS: Final = re.compile(r"\d+(?:\.\d+)?")
_UNIT_SECONDS: Final = {"d": 86_400, "h": 3600, "m": 60, "s": 1}
_UNSAFE_NAME: Final = re.compile(r'[\x00-\x1f\x7f/\\<>:"|?*]')
_MAX_NAME_BYTES: Final = 255


def parse_duration(text: str) -> float:
    """Seconds in ``text``: ``90s``, ``15m``, ``2h``, ``1h30m``, ``1d`` or plain seconds.

    Raises ``ValueError`` naming the accepted forms.
    """
    value = text.strip().lower()
    if _SECONDS.fullmatch(value):
        seconds = float(value)
    else:
        match = _DURATION.fullmatch(value)
        if not value or match is None:
            raise ValueError(f"{text!r} is not a duration; use e.g. 90s, 15m, 2h, 1h30m or seconds")
        seconds = sum(float(match[unit] or 0) * factor for unit, factor in _UNIT_SECONDS.items())
    if not math.isfinite(seconds):
        raise ValueError(f"{text!r} is too long a duration")
    return seconds


def output_name(url: str) -> str:
    """The default output file of ``url``: its last path segment, URL-decoded, made safe.

    Separators, control characters and characters that Windows forbids become ``_``;
    raises ``ValueError`` when no usable name remains (then ``-o`` is needed).
    """
    segment = urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1]
    name = _UNSAFE_NAME.sub("_", urllib.parse.unquote(segment)).strip().rstrip(". ")
    if name in ("", ".", ".."):
        raise ValueError(f"cannot tell a file name from {url!r}; name one with -o FILE")
    if len(name.encode()) > _MAX_NAME_BYTES:
        raise ValueError(f"the file name in {url!r} is too long; name one with -o FILE")
    return name


def _duration_argument(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``arkvoryctl`` (its ``--help`` documents the exit codes)."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Download from an Arkvory artifact server, waiting out its queue.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {installed_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    download = commands.add_parser(
        "download",
        help="download URL to a file, waiting in the server's queue as long as it takes",
        description=(
            "Download URL to FILE. A busy server is waited out (no deadline unless\n"
            "--wait-limit), showing the place in the queue and the estimated start,\n"
            "then the progress."
        ),
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    download.add_argument("url", metavar="URL", help="the http(s) URL of the file")
    download.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="where to save it (default: the URL's last path segment, in this directory)",
    )
    download.add_argument(
        "--class",
        dest="download_class",
        metavar="CLASS",
        choices=CLASSES,
        help=f"ask for a lower class: {', '.join(CLASSES)}",
    )
    download.add_argument(
        "--wait-limit",
        metavar="DURATION",
        type=_duration_argument,
        help="give up (exit 1) after waiting this long for the server (default: no limit)",
    )
    download.add_argument("--not-before", metavar="TIME", help="do not ask the server before TIME")
    download.add_argument(
        "--not-after",
        metavar="TIME",
        help="stop (exit 4) if the download would not start before TIME",
    )
    download.add_argument("--token", metavar="TOKEN", help=f"bearer token (default: ${TOKEN_ENV})")
    output = download.add_mutually_exclusive_group()
    output.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")
    output.add_argument(
        "--json", action="store_true", help="print one JSON object per event per line"
    )
    download.set_defaults(parser=download)
    return parser
