-- Operator settings (R-SET-1): one record with a revision; only changed fields are
-- stored, camelCase as the settings API shows them; {} means "the environment".
CREATE TABLE download_settings (
    id         boolean PRIMARY KEY DEFAULT true CHECK (id),
    revision   bigint NOT NULL DEFAULT 0 CHECK (revision >= 0),
    fields     jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(fields) = 'object'),
    updated_by text,
    updated_at timestamptz
);
INSERT INTO download_settings DEFAULT VALUES;

-- The queue-ticket signing key (R-TICKET-4): one row, created by the first writer and
-- read by every process. Not backed up: a restored installation makes its own.
CREATE TABLE arkvory_download_ticket_key (
    id         boolean PRIMARY KEY DEFAULT true CHECK (id),
    key        bytea NOT NULL CHECK (length(key) >= 32),
    created_at timestamptz NOT NULL DEFAULT now()
);
