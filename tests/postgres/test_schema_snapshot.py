"""``docs/schema.sql`` is what every migration applied to a fresh schema gives.

A migration added without ``make schema``, or a snapshot edited by hand, fails here:
the file a reader takes for the schema as it stands must be it.
"""

from __future__ import annotations

import os
import shutil

import pytest

from tests.pg import require_database
from tests.schema_snapshot import SNAPSHOT, fresh_snapshot, normalise

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # asyncpg runs on asyncio only


def _require_pg_dump() -> None:
    if shutil.which("pg_dump") is None:
        message = "pg_dump is not installed (apt-get install postgresql-client)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{message}; under CI the snapshot must be checked", pytrace=False)
        pytest.skip(message)


async def test_the_snapshot_equals_a_fresh_migration() -> None:
    url = require_database()
    _require_pg_dump()
    fresh = await fresh_snapshot(url)
    committed = SNAPSHOT.read_text(encoding="utf-8")
    assert fresh == committed, (
        "docs/schema.sql is not what the migrations give: run `make schema` "
        "(python -m tests.schema_snapshot) and commit the file"
    )


def test_the_snapshot_shows_the_current_admission_function() -> None:
    text = SNAPSHOT.read_text(encoding="utf-8")
    assert text.count("CREATE FUNCTION arkvory.admit_session(") == 1
    assert "CREATE TABLE arkvory.download_session (" in text


def test_normalising_keeps_the_schema_and_drops_the_circumstances() -> None:
    dump = (
        "\\restrict abc\n-- Dumped by pg_dump version 15.20\nSET lock_timeout = 0;\n"
        "CREATE TABLE arkvory_t_1.x (a int);\n\n\n\n"
        "CREATE FUNCTION arkvory_t_1.f() RETURNS void\n    SET search_path TO 'arkvory_t_1'\n"
        "    AS $$\nUPDATE y\nSET a = 1;\n$$;\n\\unrestrict abc\n"
    )
    assert normalise(dump, "arkvory_t_1") == (
        "CREATE TABLE arkvory.x (a int);\n\n"
        "CREATE FUNCTION arkvory.f() RETURNS void\n    SET search_path TO 'arkvory'\n"
        "    AS $$\nUPDATE y\nSET a = 1;\n$$;\n"
    )
