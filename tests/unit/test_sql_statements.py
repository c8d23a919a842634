"""The PostgreSQL store's SQL lives in ``postgres/sql/*.sql`` as named statements (ADR 0018).

These tests need no database: they prove that the shipped files are found where an
installed wheel finds them, that every statement is indexed under its own name and used
by the code, that no SQL is written in Python beside them, and that the loader refuses
the mistakes that would otherwise surface only as a failing query.
"""

from __future__ import annotations

import ast
import fnmatch
import re
import tomllib
from importlib import resources
from pathlib import Path

import pytest

from arkvory_sched.postgres import _pool, _sql, _sql_tick
from arkvory_sched.postgres._statements import (
    STATEMENTS_PACKAGE,
    StatementError,
    Template,
    parse_statement_files,
    quote_literal,
    read_statement_files,
    statement,
)

ROOT = Path(__file__).resolve().parents[2]
POSTGRES = ROOT / "src" / "arkvory_sched" / "postgres"
INDEX_MODULES = {"_sql.py": _sql, "_sql_tick.py": _sql_tick}

# Statements kept for the tests and benchmarks that compare the one-round-trip functions
# with the steps they reproduce (ADR 0011); the code itself no longer sends them.
USED_OUTSIDE_SRC = {
    "INSERT_SESSION": "benchmarks/pg_scale.py",  # the columns its fill writes
    "GLOBAL_PASS": "tests/postgres/test_one_round_trip.py",  # the last_grant_pass fragment
    "CLASS_PASSES": "tests/postgres/test_one_round_trip.py",  # the catch-up's result
}


def _index_calls() -> dict[str, tuple[str, str]]:
    """``CONSTANT -> (index module, statement name)`` for each ``statement``/``template``
    call of the index modules."""
    found: dict[str, tuple[str, str]] = {}
    for file_name in INDEX_MODULES:
        tree = ast.parse((POSTGRES / file_name).read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.AnnAssign) and isinstance(node.value, ast.Call):
                call = node.value
                assert isinstance(node.target, ast.Name)
                assert isinstance(call.func, ast.Name), ast.dump(call)
                assert call.func.id in {"statement", "template"}, call.func.id
                name = call.args[0]
                assert isinstance(name, ast.Constant) and isinstance(name.value, str)
                found[node.target.id] = (file_name, name.value)
    return found


def _python_sources() -> list[Path]:
    return sorted((ROOT / "src").rglob("*.py"))


def _names_used(paths: list[Path]) -> set[str]:
    """Attribute names (``sql.NAME``) and imported names (``from ._sql import NAME``)."""
    used: set[str] = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute):
                used.add(node.attr)
            elif isinstance(node, ast.ImportFrom):
                used.update(alias.name for alias in node.names)
    return used


# ----------------------------------------------------------------------------- shipped files


def test_the_statement_files_are_found_through_importlib_resources() -> None:
    # The way the loader reads them, so this holds for an installed wheel as well.
    directory = resources.files(STATEMENTS_PACKAGE)
    names = {entry.name for entry in directory.iterdir() if entry.name.endswith(".sql")}
    assert {"slots.sql", "sessions.sql", "tick.sql", "migrate.sql"} <= names
    assert names == {path.name for path in (POSTGRES / "sql").glob("*.sql")}
    assert all((directory / name).read_text(encoding="utf-8").strip() for name in names)


def test_pyproject_ships_every_statement_file_in_the_wheel() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert STATEMENTS_PACKAGE in config["tool"]["setuptools"]["packages"]
    patterns = config["tool"]["setuptools"]["package-data"][STATEMENTS_PACKAGE]
    for path in (POSTGRES / "sql").glob("*.sql"):
        assert any(fnmatch.fnmatch(path.name, pattern) for pattern in patterns), path.name


# ----------------------------------------------------------------------------- the index


def test_every_constant_of_the_index_modules_resolves_to_the_statement_of_its_name() -> None:
    catalog = read_statement_files()
    calls = _index_calls()
    assert len(calls) > 60
    for constant, (file_name, name) in calls.items():
        assert constant == name.upper(), f"{file_name}: {constant} loads {name!r}"
        value = getattr(INDEX_MODULES[file_name], constant)
        if isinstance(value, Template):
            assert value.text == catalog.texts[name]
        else:
            assert value == catalog.statement(name)


def test_every_statement_in_the_files_has_exactly_one_constant() -> None:
    indexed = sorted(name for _, name in _index_calls().values())
    assert indexed == sorted(read_statement_files().texts)


def test_every_statement_is_used_by_the_code() -> None:
    users = [p for p in _python_sources() if p.parent != POSTGRES or p.name not in INDEX_MODULES]
    used = _names_used(users)
    unused = sorted(set(_index_calls()) - used - set(USED_OUTSIDE_SRC))
    assert not unused, f"no module under src/ uses {unused}: delete them from sql/"


@pytest.mark.parametrize(("constant", "user"), sorted(USED_OUTSIDE_SRC.items()))
def test_statements_kept_for_tests_and_benchmarks_are_used_there_only(
    constant: str, user: str
) -> None:
    assert constant in _names_used([ROOT / user])
    users = [p for p in _python_sources() if p.parent != POSTGRES or p.name not in INDEX_MODULES]
    assert constant not in _names_used(users), "used by src/ now: drop it from the exceptions"


def test_no_sql_is_written_in_the_python_modules() -> None:
    # New SQL goes into sql/*.sql with a constant in _sql.py or _sql_tick.py.
    sql_text = re.compile(
        r"\s*(SELECT|INSERT|UPDATE|DELETE|WITH|CREATE|ALTER|DROP|COMMENT|SET|ROLLBACK|"
        r"ANALYZE|TRUNCATE|LOCK|VACUUM)\s"
    )
    found = []
    for path in POSTGRES.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
                continue
            if sql_text.match(node.value):
                found.append(f"{path.name}:{node.lineno}: {node.value[:40]!r}")
    assert not found


def test_fragments_are_put_in_place_and_documentation_is_not_sent() -> None:
    assert _sql.GLOBAL_PASS == (
        "SELECT coalesce((SELECT pass_at_grant FROM class_state "
        "ORDER BY granted_seq DESC LIMIT 1), 0)"
    )
    assert "SELECT count(*) FROM gone" in _sql_tick.EXPIRE_PAUSED
    for name, text in read_statement_files().texts.items():
        assert not text.startswith("--"), name
        assert "{last_grant_pass}" not in text and "{count_gone}" not in text, name


def test_the_array_codecs_statement_names_every_array_type_of_the_pool() -> None:
    named = re.findall(r"NULL::(\w+)\[\]", _sql.LEARN_ARRAY_CODECS)
    assert tuple(named) == _pool.ARRAY_TYPES


# ----------------------------------------------------------------------------- the loader


def test_a_name_defined_twice_is_refused_naming_both_files() -> None:
    with pytest.raises(StatementError, match=r"b\.sql: 'one' is already defined in a\.sql"):
        parse_statement_files(
            [("a.sql", "-- name: one\nSELECT 1\n"), ("b.sql", "-- name: one\nSELECT 2\n")]
        )


def test_an_unknown_name_is_refused_naming_the_files() -> None:
    catalog = parse_statement_files([("a.sql", "-- name: one\nSELECT 1\n")])
    with pytest.raises(StatementError, match=r"no statement named 'two' in .*\(a\.sql\)"):
        catalog.statement("two")
    with pytest.raises(StatementError, match="no statement named 'two'"):
        catalog.template("two", "schema")


def test_an_index_constant_with_a_misspelt_name_fails_when_it_is_imported() -> None:
    # What a line ``TAKE_OVER_LEASES: Final = statement("take_over_leases")`` runs.
    with pytest.raises(StatementError, match="no statement named 'take_over_leases'"):
        statement("take_over_leases")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("SELECT 1\n-- name: one\nSELECT 1\n", r"a\.sql:1: SQL before the first"),
        ("-- name: one\n-- a comment\n\n-- name: two\nSELECT 2\n", r"a\.sql: statement 'one' is"),
        ("-- name: Take Over\nSELECT 1\n", r"a\.sql:1: 'Take Over' is not a name"),
        ("-- fragment: part\n1\n-- name: one\nSELECT 2\n", r"a\.sql: fragment 'part' is used"),
        ("-- fragment: part\n{x}\n-- name: one\nSELECT {part}\n", r"a\.sql: fragment 'part' has"),
    ],
    ids=["sql-before-header", "empty", "bad-name", "unused-fragment", "fragment-placeholder"],
)
def test_a_malformed_file_is_refused_naming_it(text: str, problem: str) -> None:
    with pytest.raises(StatementError, match=problem):
        parse_statement_files([("a.sql", text)])


def test_documentation_comments_and_file_comments_are_not_part_of_a_statement() -> None:
    catalog = parse_statement_files(
        [
            (
                "a.sql",
                "-- What the file holds.\n\n-- name: one\n-- Why.\n--\n-- More why.\n"
                "SELECT 1\n  -- kept: inside the statement\nFROM t\n\n\n-- name: two\nSELECT 2",
            )
        ]
    )
    assert catalog.texts == {
        "one": "SELECT 1\n  -- kept: inside the statement\nFROM t",
        "two": "SELECT 2",
    }


def test_a_template_is_filled_only_with_quoted_identifiers_and_literals() -> None:
    catalog = parse_statement_files(
        [("a.sql", "-- name: note\nCOMMENT ON SCHEMA {schema} IS {comment}\n")]
    )
    with pytest.raises(StatementError, match="has placeholders"):
        catalog.statement("note")
    with pytest.raises(StatementError, match=r"has placeholders \['comment', 'schema'\]"):
        catalog.template("note", "schema")
    note = catalog.template("note", "schema", "comment")
    filled = note.fill(schema='"arkvory"', comment=quote_literal("it's transient"))
    assert filled == "COMMENT ON SCHEMA \"arkvory\" IS 'it''s transient'"
    for unsafe in ("arkvory", '"ark"; DROP TABLE t; --"', "'a' || 'b'", '"Ark"'):
        with pytest.raises(StatementError, match="must be one quoted identifier or literal"):
            note.fill(schema=unsafe, comment="'x'")
    with pytest.raises(StatementError, match="takes"):
        note.fill(schema='"arkvory"')
    with pytest.raises(StatementError, match="backslash"):
        quote_literal("C:\\temp")


def test_the_shipped_templates_fill_with_the_quoted_schema() -> None:
    assert _sql.READ_TICKET_KEY.fill(schema='"arkvory"') == (
        'SELECT key FROM "arkvory".arkvory_download_ticket_key'
    )
    assert _sql.MIGRATE_IN_SCHEMA.placeholders == {"schema"}
