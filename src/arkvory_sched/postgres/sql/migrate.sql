-- The migration runner's own statements (`_migrate.py`); the migrations themselves are
-- the numbered files of migrations/.
--
-- The runner works before the schema exists and outside any search_path, so these name
-- the schema: `{schema}` is filled with the quoted schema name (`quote_schema`).

-- name: migration_table_exists
-- $1 is the quoted, schema-qualified name of the migration table.
SELECT to_regclass($1) IS NOT NULL

-- name: applied_migrations
SELECT version FROM {schema}.schema_migration

-- name: lock_migrations
-- One advisory lock per schema, held to the end of the transaction: runners of one
-- schema take turns, runners of different schemas do not wait for each other.
SELECT pg_advisory_xact_lock($1)

-- name: schema_exists
SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)

-- name: create_schema
CREATE SCHEMA {schema}

-- name: comment_on_schema
-- A utility statement takes no parameters: `{comment}` is filled with a quoted string
-- literal (`quote_literal`) of the comment that tells a DBA what the schema holds.
COMMENT ON SCHEMA {schema} IS {comment}

-- name: create_migration_table
CREATE TABLE IF NOT EXISTS {schema}.schema_migration (
    version text PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now())

-- name: migration_applied
SELECT EXISTS (SELECT 1 FROM {schema}.schema_migration WHERE version = $1)

-- name: migrate_in_schema
-- The migration's unqualified names land in the schema; SET LOCAL ends with the
-- migration's transaction.
SET LOCAL search_path TO {schema}

-- name: record_migration
INSERT INTO {schema}.schema_migration (version) VALUES ($1)
