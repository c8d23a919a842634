-- The audit trail of the operator settings record (R-SET-5, R-CLASS-6, ADR 0022).
--
-- Every applied change and every refused attempt is one row, newest = highest id.
-- Applied changes are written by the trigger below, inside the compare-and-set's own
-- statement: the change and its audit row commit together or not at all, and the
-- compare-and-set stays one `UPDATE … WHERE revision = $expected` (no transaction, no
-- second round trip). Refused attempts (revision mismatch, invalid fields) change no
-- record row, so the store inserts them itself, one statement each.
CREATE TABLE download_settings_audit (
    id                bigserial PRIMARY KEY,
    at                timestamptz NOT NULL DEFAULT now(),
    actor             text NOT NULL,
    outcome           text NOT NULL
                      CHECK (outcome IN ('applied', 'revision_mismatch', 'invalid')),
    -- The revision the writer expected, and the revision the record got (applied) or
    -- was at (refused); revision_by made that revision (NULL: the environment's).
    expected_revision bigint NOT NULL,
    revision          bigint NOT NULL,
    revision_by       text,
    -- The record before, and the record after (applied) or the fields asked for.
    before            jsonb NOT NULL,
    attempted         jsonb NOT NULL,
    -- Why a refused attempt was refused (invalid: the camelCase path and the reason).
    detail            text
);

-- SET search_path FROM CURRENT: the trigger runs on connections whose search_path is
-- not this schema (the settings store names its tables with the schema).
CREATE FUNCTION audit_settings_change() RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
    INSERT INTO download_settings_audit
        (at, actor, outcome, expected_revision, revision, revision_by, before, attempted)
    VALUES (
        coalesce(NEW.updated_at, now()), coalesce(NEW.updated_by, 'unknown'), 'applied',
        OLD.revision, NEW.revision, NEW.updated_by, OLD.fields, NEW.fields
    );
    RETURN NULL;
END
$$;

CREATE TRIGGER download_settings_audited
AFTER UPDATE ON download_settings
FOR EACH ROW EXECUTE FUNCTION audit_settings_change();
