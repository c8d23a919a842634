-- The operator settings record and the queue-ticket signing key (migration 0002).
--
-- These are used before a scheduler's pool with its search_path exists (the CLI, a
-- store on any connection), so they name their table with the schema: `{schema}` is
-- filled with the quoted schema name (`quote_schema`), never with anything else.

-- name: read_settings
SELECT revision, fields::text AS fields, updated_by, updated_at
FROM {schema}.download_settings

-- name: save_settings
-- A compare-and-set in one statement: no row when another change came first.
UPDATE {schema}.download_settings
SET revision = revision + 1, fields = $1::jsonb, updated_by = $2, updated_at = now()
WHERE revision = $3
RETURNING revision, fields::text AS fields, updated_by, updated_at

-- name: settings_revision
SELECT revision FROM {schema}.download_settings

-- name: create_ticket_key
-- Does nothing when a key exists: a writer that loses the race keeps the winner's key.
INSERT INTO {schema}.arkvory_download_ticket_key (key) VALUES ($1)
ON CONFLICT (id) DO NOTHING

-- name: read_ticket_key
SELECT key FROM {schema}.arkvory_download_ticket_key
