"""A small artifact server that puts the download scheduler in front of a directory.

It exists to show and measure the scheduler with real HTTP clients: the file server
speaks what curl, wget, browsers and the SDK expect (ranges, validators, resumption),
a shared bandwidth cap turns loopback into a congested link, and ``arkvory-demo``
(:func:`main`) runs it. The server itself is :func:`build_app`; its parts are usable
on their own.
"""

from __future__ import annotations

from ._app import build_app, load_ticket_key
from ._auth import ANONYMOUS_LINK, Principal, TokenMap, parse_token, parse_tokens, principal_for
from ._bandwidth import BandwidthGovernor
from ._cli import create_example, main
from ._files import FileInfo, FileServer, find_file
from ._resolver import make_resolver

__all__ = [
    "ANONYMOUS_LINK",
    "BandwidthGovernor",
    "FileInfo",
    "FileServer",
    "Principal",
    "TokenMap",
    "build_app",
    "create_example",
    "find_file",
    "load_ticket_key",
    "main",
    "make_resolver",
    "parse_token",
    "parse_tokens",
    "principal_for",
]
