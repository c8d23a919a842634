"""A second process on the same settings store: ``python -m tests.contract._store_process``.

Arguments: ``sqlite PATH`` or ``postgres DSN SCHEMA``, then a command:

* ``write REVISION JSON ACTOR``: compare-and-set the JSON fields at REVISION, print
  the new revision;
* ``writes COUNT ACTOR``: COUNT compare-and-sets, each retried on a mismatch until it
  is saved; print the number of mismatches met;
* ``read``: print the record as JSON (revision, fields, updatedBy);
* ``key PATH [LEGACY]``: (sqlite only) print the ticket key of PATH as hex, importing
  the legacy key file if given.

A process of its own, not a thread: it proves the record and the key are in the file
or the database, not in some object of the test's process.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from arkvory_sched import RevisionMismatchError, SchedulerSettings, SettingsStore
from arkvory_sched.postgres import PostgresSettingsStore
from arkvory_sched.sqlite import SqliteSettingsStore, load_or_create_ticket_key

ENVIRONMENT = SchedulerSettings(sessions=16)


def _store(argv: list[str]) -> tuple[SettingsStore, list[str]]:
    if argv[0] == "sqlite":
        return SqliteSettingsStore(argv[1], environment=ENVIRONMENT), argv[2:]
    return PostgresSettingsStore(argv[1], environment=ENVIRONMENT, schema=argv[2]), argv[3:]


async def _main(argv: list[str]) -> None:
    if argv[0] == "key":
        legacy = Path(argv[2]) if len(argv) > 2 else None
        print(load_or_create_ticket_key(argv[1], legacy_key_file=legacy).hex())
        return
    store, command = _store(argv)
    try:
        if command[0] == "write":
            saved = await store.compare_and_set(
                json.loads(command[2]), expected_revision=int(command[1]), updated_by=command[3]
            )
            print(saved.revision)
        elif command[0] == "writes":
            print(await _writes(store, int(command[1]), command[2]))
        else:
            stored = await store.read()
            print(
                json.dumps(
                    {
                        "revision": stored.revision,
                        "fields": dict(stored.fields),
                        "updatedBy": stored.updated_by,
                    }
                )
            )
    finally:
        await store.close()


async def _writes(store: SettingsStore, count: int, actor: str) -> int:
    mismatches = 0
    for number in range(count):
        while True:
            current = await store.read()
            try:
                await store.compare_and_set(
                    {"idleSeconds": 1 + number},
                    expected_revision=current.revision,
                    updated_by=actor,
                )
            except RevisionMismatchError:
                mismatches += 1
                continue
            break
    return mismatches


if __name__ == "__main__":
    asyncio.run(_main(sys.argv[1:]))
