"""The PostgreSQL store's SQL, read by name from the ``.sql`` files of ``postgres/sql/``.

The statements are the protocol of the shared queue (ADR 0010, ADR 0018). Kept as SQL
files they read, highlight and run in ``psql`` as what they are, a DBA reviews them
without reading Python, and each carries its reasons in SQL comments next to it.

A file of ``sql/`` holds any number of blocks::

    -- name: take_over_lease
    -- Why the statement is what it is: comment lines right after the header are
    -- documentation and are not sent to the server.
    UPDATE download_slot SET ... WHERE ...

A block runs to the next header; lines before a file's first header are the file's
own comment and may hold nothing but comments. Names are lower-case, unique across
all files (a statement can move to another file without its callers noticing) and
bound to Python by the index modules ``_sql.py`` and ``_sql_tick.py``, one constant
per statement with the upper-case name: ``TAKE_OVER_LEASE: Final = statement(
"take_over_lease")``, so that mypy catches a misspelt constant and importing the
index fails on a misspelt name. Values are always ``$n`` parameters.

Statements are plain text; two kinds of ``{placeholder}`` (lower case, so an array
literal such as ``'{1,2}'`` is left alone) are how text is put into one, and nothing
else is:

* **Fragments**, SQL shared by several statements, filled when the files are read. A
  block headed ``-- fragment: last_grant_pass`` is not a statement of its own;
  ``{last_grant_pass}`` in any statement is replaced by it. A fragment nobody uses is
  an error, as is a fragment with a placeholder of its own.
* **Quoted tokens**, filled by the caller, where SQL takes no parameter: the schema
  of the statements that may run on a connection without the queue's
  ``search_path`` (the migration runner, the settings store, the ticket key) and the
  schema's ``COMMENT`` (a utility statement). A statement with such a placeholder is
  a :class:`Template`: ``template("read_settings", "schema")`` names the placeholders
  it must have, and :meth:`Template.fill` accepts for each only one already quoted
  token, checked here: a double-quoted plain identifier (what ``quote_schema``
  returns, ``"arkvory"``) or one string literal without backslashes (what
  :func:`quote_literal` returns). A value can therefore never become SQL, and
  :func:`statement` refuses a template, so an unfilled placeholder never reaches the
  server.

Everything here runs when the package is imported: a malformed file, a duplicate
name, an unknown name or a placeholder mismatch raises :class:`StatementError` naming
the file, before any connection is made.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Final

__all__ = [
    "STATEMENTS_PACKAGE",
    "StatementCatalog",
    "StatementError",
    "Template",
    "parse_statement_files",
    "quote_literal",
    "read_statement_files",
    "statement",
    "template",
]

STATEMENTS_PACKAGE: Final = "arkvory_sched.postgres.sql"

_HEADER: Final = re.compile(r"--\s*(?P<kind>name|fragment):(?P<name>.*)")
_NAME: Final = re.compile(r"[a-z][a-z0-9_]*")
_PLACEHOLDER: Final = re.compile(r"\{([a-z][a-z0-9_]*)\}")
_QUOTED_IDENTIFIER: Final = re.compile(r'"[a-z_][a-z0-9_]{0,62}"')
_QUOTED_LITERAL: Final = re.compile(r"'(?:[^'\\]|'')*'")


class StatementError(Exception):
    """A statement file is malformed, or code asks for what the files do not hold.

    A defect of the package itself (or of a broken installation), raised on import.
    """


@dataclass(frozen=True, slots=True)
class Template:
    """A statement with placeholders for quoted identifiers or literals (module docstring)."""

    name: str
    text: str
    placeholders: frozenset[str]

    def fill(self, **parts: str) -> str:
        """The statement with each ``{placeholder}`` replaced by its quoted token."""
        if set(parts) != self.placeholders:
            raise StatementError(
                f"{self.name} takes {sorted(self.placeholders)}, was given {sorted(parts)}"
            )
        for key, value in parts.items():
            if not (_QUOTED_IDENTIFIER.fullmatch(value) or _QUOTED_LITERAL.fullmatch(value)):
                raise StatementError(
                    f"{self.name}: {{{key}}} must be one quoted identifier or literal, "
                    f"not {value!r}"
                )
        return _PLACEHOLDER.sub(lambda match: parts[match[1]], self.text)


def quote_literal(text: str) -> str:
    """``text`` as an SQL string literal; refuses backslashes, whose meaning depends on
    the server's ``standard_conforming_strings``."""
    if "\\" in text:
        raise StatementError(f"a literal with a backslash is not supported: {text!r}")
    return "'" + text.replace("'", "''") + "'"


@dataclass(frozen=True, slots=True)
class StatementCatalog:
    """Every statement of a set of files, fragments already in place, by name."""

    texts: Mapping[str, str]
    files: Mapping[str, str]  # statement name -> the file it is in

    def statement(self, name: str) -> str:
        """The statement ``name``, ready to send; it must have no placeholders."""
        text = self._text(name)
        if _PLACEHOLDER.search(text):
            raise StatementError(
                f"{name} in {self.files[name]} has placeholders "
                f"{sorted(set(_PLACEHOLDER.findall(text)))}: load it with template()"
            )
        return text

    def template(self, name: str, *placeholders: str) -> Template:
        """The statement ``name``, whose placeholders must be exactly ``placeholders``."""
        text = self._text(name)
        found = frozenset(_PLACEHOLDER.findall(text))
        if not placeholders or found != set(placeholders):
            raise StatementError(
                f"{name} in {self.files[name]} has placeholders {sorted(found)}, "
                f"not {sorted(placeholders)}"
            )
        return Template(name, text, found)

    def _text(self, name: str) -> str:
        try:
            return self.texts[name]
        except KeyError:
            raise StatementError(
                f"no statement named {name!r} in the files of {STATEMENTS_PACKAGE} "
                f"({', '.join(sorted(set(self.files.values())))})"
            ) from None


def parse_statement_files(files: Iterable[tuple[str, str]]) -> StatementCatalog:
    """The catalog of ``files``, given as ``(file name, text)`` pairs."""
    blocks: dict[str, tuple[str, str, str]] = {}  # name -> (kind, file, text)
    for file_name, text in files:
        for kind, name, body in _blocks(file_name, text):
            if name in blocks:
                raise StatementError(
                    f"{file_name}: {name!r} is already defined in {blocks[name][1]}"
                )
            blocks[name] = (kind, file_name, body)
    fragments = {name: block for name, block in blocks.items() if block[0] == "fragment"}
    used: set[str] = set()

    def expand(match: re.Match[str]) -> str:
        if match[1] not in fragments:
            return match[0]  # a template's placeholder, filled by its caller
        used.add(match[1])
        return fragments[match[1]][2]

    texts: dict[str, str] = {}
    files_of: dict[str, str] = {}
    for name, (kind, file_name, body) in blocks.items():
        if kind == "fragment":
            if _PLACEHOLDER.search(body):
                raise StatementError(f"{file_name}: fragment {name!r} has a placeholder")
            continue
        texts[name] = _PLACEHOLDER.sub(expand, body)
        files_of[name] = file_name
    for name in fragments.keys() - used:
        raise StatementError(f"{fragments[name][1]}: fragment {name!r} is used by no statement")
    return StatementCatalog(texts, files_of)


def _blocks(file_name: str, text: str) -> list[tuple[str, str, str]]:
    """``(kind, name, text)`` of each block of one file, documentation stripped."""
    found: list[tuple[str, str, list[str]]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.fullmatch(line)
        if header is not None:
            name = header["name"].strip()
            if not _NAME.fullmatch(name):
                raise StatementError(
                    f"{file_name}:{number}: {name!r} is not a name "
                    "(lower case, digits and _, starting with a letter)"
                )
            found.append((header["kind"], name, []))
        elif found:
            found[-1][2].append(line)
        elif line.strip() and not line.lstrip().startswith("--"):
            raise StatementError(f"{file_name}:{number}: SQL before the first '-- name:' header")
    blocks = []
    for kind, name, lines in found:
        while lines and (not lines[0].strip() or lines[0].lstrip().startswith("--")):
            lines.pop(0)  # the block's documentation
        body = "\n".join(lines).strip()
        if not body:
            what = "statement" if kind == "name" else kind
            raise StatementError(f"{file_name}: {what} {name!r} is empty")
        blocks.append((kind, name, body))
    return blocks


def read_statement_files() -> StatementCatalog:
    """The catalog of every ``*.sql`` file shipped in :data:`STATEMENTS_PACKAGE`."""
    files = sorted(
        (entry.name, entry.read_text(encoding="utf-8"))
        for entry in resources.files(STATEMENTS_PACKAGE).iterdir()
        if entry.name.endswith(".sql") and entry.is_file()
    )
    if not files:
        raise StatementError(f"no .sql files in {STATEMENTS_PACKAGE}")
    return parse_statement_files(files)


_CATALOG: Final = read_statement_files()


def statement(name: str) -> str:
    """The shipped statement ``name`` (see :meth:`StatementCatalog.statement`)."""
    return _CATALOG.statement(name)


def template(name: str, *placeholders: str) -> Template:
    """The shipped template ``name`` (see :meth:`StatementCatalog.template`)."""
    return _CATALOG.template(name, *placeholders)
