"""The README's fenced code blocks, for the tests that run them as a newcomer would.

A block is found by a piece of text only it holds, so a test names what it runs
("the block with ``--limit-rate``") and fails, naming the piece, when the README no
longer has exactly one such block: a command a test runs cannot drift from the one a
reader copies.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[1]
README: Final = ROOT / "README.md"
#: Where the README's commands reach ``make run``: a test puts its own server's port here.
README_ADDRESS: Final = "127.0.0.1:8000"
_FENCE = re.compile(r"^```(\S*)[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class Fence:
    """One fenced block: its language tag (``""`` for none), its text and first line."""

    language: str
    text: str
    line: int

    def at_port(self, port: int) -> str:
        """The text with ``make run``'s address moved to ``port``; the block must name it."""
        assert README_ADDRESS in self.text, f"README line {self.line} never names {README_ADDRESS}"
        return self.text.replace(README_ADDRESS, f"127.0.0.1:{port}")


def fences(path: Path = README) -> list[Fence]:
    text = path.read_text(encoding="utf-8")
    return [
        Fence(match[1], match[2], text.count("\n", 0, match.start()) + 2)
        for match in _FENCE.finditer(text)
    ]


def fence(containing: str, language: str | None = None) -> Fence:
    """The one block holding ``containing`` (of ``language``, when given)."""
    found = [
        block
        for block in fences()
        if containing in block.text and (language is None or block.language == language)
    ]
    assert len(found) == 1, (
        f"README.md: {len(found)} blocks hold {containing!r} (language {language}); "
        f"expected one: {[block.line for block in found]}"
    )
    return found[0]
