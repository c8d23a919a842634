-- Issue #28: a slot freed by one process wakes the requests held at the door by every
-- other process, instead of their next re-check (a quarter of a second), which with
-- sessions of a couple of seconds idled 4-5 % of the slot-seconds. One notification
-- per freeing statement's transaction (PostgreSQL folds equal ones), on a channel all
-- schemas share, its payload the schema: a listener ignores other schemas' slots.
-- Only a slot going from held to free notifies: a claim or a renewal says nothing.
CREATE FUNCTION signal_slot_free() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('arkvory_slot_free', TG_TABLE_SCHEMA);
    RETURN NULL;
END
$$;

CREATE TRIGGER slot_freed AFTER UPDATE OF session_key ON download_slot
FOR EACH ROW WHEN (OLD.session_key IS NOT NULL AND NEW.session_key IS NULL)
EXECUTE FUNCTION signal_slot_free();
