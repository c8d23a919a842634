"""The SQL of the shared queue by name: an index of the statements in ``sql/*.sql``.

The statements themselves, with the reasons for each, are in the ``.sql`` files beside
this module (ADR 0018; ``_statements`` reads them). Here each gets the constant the
code uses, named as the statement in upper case, so that mypy catches a misspelt
constant and importing this module fails on a misspelt statement name. The leader's
tick has its own index, ``_sql_tick``.

Conventions of the statements: ``$``-parameters only (never formatted values),
unqualified table names (each connection's ``search_path`` is the queue's schema;
templates name the schema where there is no such connection yet), lease times from the
database clock (``now()``), queue times as fleet seconds passed in by the caller.
Every statement that changes a slot names the fencing token it expects: a holder with
an old token changes nothing (R-PG-3). See ADR 0010 for the failure analysis.
"""

from __future__ import annotations

from typing import Final

from ._statements import statement, template

# ----------------------------------------------------------------------------- slots.sql

ENSURE_SLOTS: Final = statement("ensure_slots")
ANALYZE_SLOTS: Final = statement("analyze_slots")
ADMIT_SESSION: Final = statement("admit_session")
CLAIM_SLOT: Final = statement("claim_slot")
LOCK_CLASS_CLAIMS: Final = statement("lock_class_claims")
ADVANCE_ROUND: Final = statement("advance_round")
TAKE_OVER_LEASE: Final = statement("take_over_lease")
RENEW_LEASES: Final = statement("renew_leases")
TAKE_RANGE: Final = statement("take_range")
GIVE_BACK_RANGES: Final = statement("give_back_ranges")
RELEASE_SLOT: Final = statement("release_slot")

# ----------------------------------------------------------------------------- sessions.sql

SESSION_WITH_LEASE: Final = statement("session_with_lease")
OTHERS_WAITING: Final = statement("others_waiting")
ROUND_TAG: Final = statement("round_tag")
INSERT_SESSION: Final = statement("insert_session")
RESUME_PAUSED: Final = statement("resume_paused")
POSITION: Final = statement("position")
RECORD_CHECK: Final = statement("record_check")
RECORD_DELIVERY: Final = statement("record_delivery")
RECORD_INTERRUPTION: Final = statement("record_interruption")
STORE_IN_FLIGHT: Final = statement("store_in_flight")
NOTE_RELEASE: Final = statement("note_release")
NOTE_START_HINT: Final = statement("note_start_hint")
TOUCH_SESSIONS: Final = statement("touch_sessions")

# ----------------------------------------------------------------------------- queue.sql

QUEUE_SNAPSHOT: Final = statement("queue_snapshot")
QUEUE_SHAPE: Final = statement("queue_shape")
STORE_SHAPE: Final = statement("store_shape")
CATCH_UP_IDLE_CLASSES: Final = statement("catch_up_idle_classes")
GLOBAL_PASS: Final = statement("global_pass")
STATS: Final = statement("stats")
COUNTERS: Final = statement("counters")

# ----------------------------------------------------------------------------- fleet.sql

HEARTBEAT: Final = statement("heartbeat")
LEAVE_FLEET: Final = statement("leave_fleet")
TAKE_LEADERSHIP: Final = statement("take_leadership")
RESIGN_LEADERSHIP: Final = statement("resign_leadership")
CONFIRM_LEADERSHIP: Final = statement("confirm_leadership")

# ----------------------------------------------------------------------------- preemption.sql

UNBLOCK_YIELDERS: Final = statement("unblock_yielders")
CANCEL_STALE_YIELDS: Final = statement("cancel_stale_yields")
PENDING_YIELD: Final = statement("pending_yield")
PREEMPTION_CANDIDATES: Final = statement("preemption_candidates")
REQUEST_YIELD: Final = statement("request_yield")
REQUEUE_YIELDER: Final = statement("requeue_yielder")
ACTIVE_BY_PRINCIPAL: Final = statement("active_by_principal")
UNDER_SHARE_WAITING: Final = statement("under_share_waiting")
CLAIMANT_SHARE: Final = statement("claimant_share")
SESSION_BLOCKED: Final = statement("session_blocked")
MARKED_EXPECTED: Final = statement("marked_expected")

# ----------------------------------------------------------------------------- tick.sql
# (the rest of tick.sql is indexed by _sql_tick)

SET_MARKS: Final = statement("set_marks")
COUNT_EXPIRIES: Final = statement("count_expiries")

# ----------------------------------------------------------------------------- strategy.sql

WAITING_FOR_REKEY: Final = statement("waiting_for_rekey")
REKEY_WAITING: Final = statement("rekey_waiting")
FORGET_ALL_ROUNDS: Final = statement("forget_all_rounds")
REKEY_ROUND_TAGS: Final = statement("rekey_round_tags")

# ----------------------------------------------------------------------------- settings.sql
# Templates: ``.fill(schema=quote_schema(schema))``.

READ_SETTINGS: Final = template("read_settings", "schema")
SAVE_SETTINGS: Final = template("save_settings", "schema")
AUDIT_REFUSAL: Final = template("audit_refusal", "schema")
SETTINGS_HISTORY: Final = template("settings_history", "schema")
CREATE_TICKET_KEY: Final = template("create_ticket_key", "schema")
READ_TICKET_KEY: Final = template("read_ticket_key", "schema")

# ----------------------------------------------------------------------------- migrate.sql

MIGRATION_TABLE_EXISTS: Final = statement("migration_table_exists")
APPLIED_MIGRATIONS: Final = template("applied_migrations", "schema")
LOCK_MIGRATIONS: Final = statement("lock_migrations")
SCHEMA_EXISTS: Final = statement("schema_exists")
CREATE_SCHEMA: Final = template("create_schema", "schema")
COMMENT_ON_SCHEMA: Final = template("comment_on_schema", "schema", "comment")
CREATE_MIGRATION_TABLE: Final = template("create_migration_table", "schema")
MIGRATION_APPLIED: Final = template("migration_applied", "schema")
MIGRATE_IN_SCHEMA: Final = template("migrate_in_schema", "schema")
RECORD_MIGRATION: Final = template("record_migration", "schema")

# ----------------------------------------------------------------------------- pool.sql

LEARN_ARRAY_CODECS: Final = statement("learn_array_codecs")
ROLLBACK: Final = statement("rollback")

# ----------------------------------------------------------------------------- queue_state.sql

QUEUE_STATE_ACTIVE: Final = statement("queue_state_active")
QUEUE_STATE_HEADS: Final = statement("queue_state_heads")

# ----------------------------------------------------------------------------- own_downloads.sql

OWN_DOWNLOADS: Final = statement("own_downloads")

# ----------------------------------------------------------------------------- row values

# ``download_session.state`` (migration 0001) as the statements' rows carry it.
WAITING: Final = 0
ACTIVE: Final = 1  # holds a slot
PAUSED: Final = 2  # slot released, place kept
