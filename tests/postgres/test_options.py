"""``PostgresOptions`` is the one place the scheduler's build options and defaults live."""

from __future__ import annotations

import dataclasses

import pytest

from arkvory_sched import SchedulerSettings
from arkvory_sched.postgres import PostgresOptions, PostgresScheduler
from arkvory_sched.postgres._options import PostgresOptionChanges

DSN = "postgresql://127.0.0.1:1/never-connected"  # from_dsn connects only in start()


def test_the_keyword_arguments_are_exactly_the_options_fields() -> None:
    # from_dsn/connect take the fields as keywords; a field added to one list only
    # would be refused by mypy in callers but not noticed here without this check.
    fields = {field.name for field in dataclasses.fields(PostgresOptions)}
    assert set(PostgresOptionChanges.__annotations__) == fields


def test_options_are_keyword_only_and_frozen() -> None:
    options = PostgresOptions(pool_size=3)
    with pytest.raises(TypeError):
        PostgresOptions("other_schema")  # type: ignore[call-arg]
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.pool_size = 4  # type: ignore[misc]


def test_from_dsn_builds_its_options_from_the_old_keyword_arguments() -> None:
    settings = SchedulerSettings(sessions=2)
    scheduler = PostgresScheduler.from_dsn(
        DSN, settings=settings, node_id="node-a", pool_size=3, migrate=False
    )
    assert scheduler.options == PostgresOptions(
        settings=settings, node_id="node-a", pool_size=3, migrate=False
    )
    assert scheduler.node_id == "node-a"
    assert scheduler.settings.sessions == 2


def test_keyword_arguments_override_an_options_value() -> None:
    base = PostgresOptions(settings=SchedulerSettings(), pool_size=3, lease_seconds=6.0)
    scheduler = PostgresScheduler.from_dsn(DSN, base, pool_size=5)
    assert scheduler.options == dataclasses.replace(base, pool_size=5)
