"""The exception tree drawn in ``_exceptions``' docstring is the real one, and all of it is used.

A class nobody raises is a promise to callers that cannot be kept (they would catch
it in vain), and a class missing from the drawing is one a caller cannot find.
"""

from __future__ import annotations

import re
from pathlib import Path

import arkvory_sched.demo
import arkvory_sched.postgres
from arkvory_sched import _exceptions
from arkvory_sched._exceptions import ArkvoryError

SRC = Path(__file__).resolve().parents[2] / "src"
TREE_LINE = re.compile(r"^(?P<indent>[ │├└─]*)(?P<name>[A-Z][A-Za-z]*Error)\b")


def drawn_tree() -> dict[str, str | None]:
    """Each class of the drawing and its parent there (``None`` for the root)."""
    block = (_exceptions.__doc__ or "").split("::\n\n", 1)[1].split("\n\n", 1)[0]
    parents: dict[str, str | None] = {}
    stack: list[tuple[int, str]] = []  # (column, name) of the open branches
    for line in block.splitlines():
        match = TREE_LINE.match(line.strip(" "))
        assert match is not None, line
        column = len(line) - len(line.lstrip(" │├└─"))
        while stack and stack[-1][0] >= column:
            stack.pop()
        parents[match["name"]] = stack[-1][1] if stack else None
        stack.append((column, match["name"]))
    return parents


def defined_exceptions() -> dict[str, type[BaseException]]:
    assert arkvory_sched.postgres and arkvory_sched.demo  # imported for their subclasses
    found: dict[str, type[BaseException]] = {}
    pending: list[type[BaseException]] = [ArkvoryError]
    while pending:
        cls = pending.pop()
        found[cls.__name__] = cls
        pending.extend(cls.__subclasses__())
    return found


def test_the_drawing_shows_every_exception_of_the_package() -> None:
    assert set(drawn_tree()) == set(defined_exceptions())


def test_the_drawing_shows_each_exception_under_its_parent() -> None:
    classes = defined_exceptions()
    for name, parent in drawn_tree().items():
        if parent is None:
            assert classes[name] is ArkvoryError
        else:
            assert classes[parent] in classes[name].__bases__, name


def test_every_exception_is_raised_somewhere() -> None:
    source = "\n".join(path.read_text(encoding="utf-8") for path in SRC.rglob("*.py"))
    for name in defined_exceptions():
        if name == ArkvoryError.__name__:
            continue  # the root is what callers may catch, never what is raised
        assert re.search(rf"raise {name}\(", source), f"{name} is never raised"


def test_the_root_is_never_raised_bare() -> None:
    """Every failure has a name a caller can catch precisely (the API catches names)."""
    source = "\n".join(path.read_text(encoding="utf-8") for path in SRC.rglob("*.py"))
    assert not re.search(r"raise ArkvoryError\(", source)
