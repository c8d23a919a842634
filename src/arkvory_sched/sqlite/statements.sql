-- The statements of the settings file (schema.sql), by name, as PostgreSQL's are kept
-- (ADR 0018): `?n` parameters only; times in UTC, ISO 8601, from SQLite's clock.

-- name: read_settings
SELECT revision, fields, updated_by, updated_at FROM download_settings WHERE id = 1

-- name: save_settings
-- A compare-and-set in one statement: no row when another change came first. The
-- statement takes the file's write lock before it reads the revision, so of two
-- writers (connections or processes) that read one revision exactly one wins; the
-- trigger writes the audit row inside it.
UPDATE download_settings
SET revision = revision + 1, fields = ?1, updated_by = ?2,
    updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
WHERE id = 1 AND revision = ?3
RETURNING revision, fields, updated_by, updated_at

-- name: audit_refusal
-- A refused attempt (?2: 'revision_mismatch' or 'invalid') with the record as it is
-- now: the caller learns the current revision and who made it from the row written.
INSERT INTO download_settings_audit
    (at, actor, outcome, expected_revision, revision, revision_by, before, attempted, detail)
SELECT strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), ?1, ?2, ?3, revision, updated_by, fields, ?4, ?5
FROM download_settings WHERE id = 1
RETURNING revision, revision_by

-- name: settings_history
-- Newest first, a page of ?1 rows below the id ?2 (NULL: from the newest).
SELECT id, at, actor, outcome, expected_revision, revision, revision_by, before, attempted,
       detail
FROM download_settings_audit
WHERE ?2 IS NULL OR id < ?2
ORDER BY id DESC
LIMIT ?1

-- name: create_ticket_key
-- Does nothing when a key exists: a process that loses the race keeps the winner's key.
INSERT INTO arkvory_download_ticket_key (id, key, source, created_at)
VALUES (1, ?1, ?2, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
ON CONFLICT (id) DO NOTHING

-- name: read_ticket_key
SELECT key FROM arkvory_download_ticket_key WHERE id = 1
