-- The operator settings record, its audit trail and the queue-ticket signing key
-- (migrations 0002 and 0010).
--
-- These are used before a scheduler's pool with its search_path exists (the CLI, a
-- store on any connection), so they name their table with the schema: `{schema}` is
-- filled with the quoted schema name (`quote_schema`), never with anything else.

-- name: read_settings
SELECT revision, fields::text AS fields, updated_by, updated_at
FROM {schema}.download_settings

-- name: save_settings
-- A compare-and-set in one statement: no row when another change came first.
-- PostgreSQL re-checks `revision = $3` on the newest row version after waiting for a
-- concurrent writer's row lock, so of two writers that read one revision exactly one
-- wins. The AFTER UPDATE trigger (migration 0010) writes the audit row in the same
-- statement.
UPDATE {schema}.download_settings
SET revision = revision + 1, fields = $1::jsonb, updated_by = $2, updated_at = now()
WHERE revision = $3
RETURNING revision, fields::text AS fields, updated_by, updated_at

-- name: audit_refusal
-- A refused attempt ($2: 'revision_mismatch' or 'invalid'), with the record as it is
-- now: the caller learns the current revision and who made it from the row written.
INSERT INTO {schema}.download_settings_audit
    (actor, outcome, expected_revision, revision, revision_by, before, attempted, detail)
SELECT $1, $2, $3, revision, updated_by, fields, $4::jsonb, $5
FROM {schema}.download_settings
RETURNING revision, revision_by

-- name: settings_history
-- Newest first, a page of $1 rows below the id $2 (NULL: from the newest).
SELECT id, at, actor, outcome, expected_revision, revision, revision_by,
       before::text AS before, attempted::text AS attempted, detail
FROM {schema}.download_settings_audit
WHERE $2::bigint IS NULL OR id < $2
ORDER BY id DESC
LIMIT $1

-- name: create_ticket_key
-- Does nothing when a key exists: a writer that loses the race keeps the winner's key.
INSERT INTO {schema}.arkvory_download_ticket_key (key) VALUES ($1)
ON CONFLICT (id) DO NOTHING

-- name: read_ticket_key
SELECT key FROM {schema}.arkvory_download_ticket_key
