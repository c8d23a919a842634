-- The settings file of the embedded default (ADR 0022): the operator settings record,
-- its audit trail and the queue-ticket signing key, the same tables as PostgreSQL's
-- (migrations 0002 and 0010) in SQLite's dialect.
--
-- Run as one script by every process that opens the file, as often as it likes: every
-- statement is IF NOT EXISTS or ON CONFLICT DO NOTHING, and BEGIN IMMEDIATE takes the
-- file's write lock first, so two processes opening a new file at once create it once
-- (the second waits for the first, busy_timeout, and then finds everything there).
-- user_version is the schema's version, for a future change of these tables.
--
-- WAL: readers never wait for the writer, and the writer waits for no reader. It is a
-- property of the file (kept once set); it needs no lock of the schema's transaction.
PRAGMA journal_mode = WAL;

BEGIN IMMEDIATE;

-- Operator settings (R-SET-1): one record with a revision; only changed fields are
-- stored, camelCase as the settings API shows them; {} means "the environment".
CREATE TABLE IF NOT EXISTS download_settings (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    revision   INTEGER NOT NULL DEFAULT 0 CHECK (revision >= 0),
    fields     TEXT NOT NULL DEFAULT '{}' CHECK (json_type(fields) = 'object'),
    updated_by TEXT,
    updated_at TEXT
);
INSERT INTO download_settings (id) VALUES (1) ON CONFLICT (id) DO NOTHING;

-- Every applied change and every refused attempt, newest = highest id (AUTOINCREMENT:
-- an id is never used twice, so a page boundary never moves).
CREATE TABLE IF NOT EXISTS download_settings_audit (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    at                TEXT NOT NULL,
    actor             TEXT NOT NULL,
    outcome           TEXT NOT NULL
                      CHECK (outcome IN ('applied', 'revision_mismatch', 'invalid')),
    expected_revision INTEGER NOT NULL,
    revision          INTEGER NOT NULL,
    revision_by       TEXT,
    before            TEXT NOT NULL,
    attempted         TEXT NOT NULL,
    detail            TEXT
);

-- The applied change's audit row, written inside the compare-and-set's own statement.
CREATE TRIGGER IF NOT EXISTS download_settings_audited
AFTER UPDATE ON download_settings
FOR EACH ROW
BEGIN
    INSERT INTO download_settings_audit
        (at, actor, outcome, expected_revision, revision, revision_by, before, attempted)
    VALUES (
        coalesce(NEW.updated_at, strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
        coalesce(NEW.updated_by, 'unknown'), 'applied',
        OLD.revision, NEW.revision, NEW.updated_by, OLD.fields, NEW.fields
    );
END;

-- The queue-ticket signing key (R-TICKET-4): one row, created by the first process to
-- open the file; `source` says whether it was made here or imported from the demo's
-- older key file, whose tickets clients still hold.
CREATE TABLE IF NOT EXISTS arkvory_download_ticket_key (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    key        BLOB NOT NULL CHECK (length(key) >= 16),
    source     TEXT NOT NULL CHECK (source IN ('generated', 'imported')),
    created_at TEXT NOT NULL
);

PRAGMA user_version = 1;

COMMIT;
