-- R-EST-4: a wait is scored against the estimate announced during THAT wait, with the
-- interval announced with it. The interval is computed from the moment of the estimate
-- (arkvory_sched._accuracy.announced_interval), so that moment is stored beside it.
ALTER TABLE download_session ADD COLUMN first_estimate_at double precision;

-- Between classes, a class that had nobody waiting catches up with the pass of the last
-- grant (the in-memory fair queue's "global pass"), not with the slowest busy class.
-- Every grant raises its class's pass (ADVANCE_ROUND, admit_session); this trigger
-- records the pass it had before and orders the grants, so the leader can read the
-- last one. The leader's catch-up raises passes too but moves ``caught_up_to`` with
-- them, which tells the two apart.
ALTER TABLE class_state
    ADD COLUMN pass_at_grant double precision NOT NULL DEFAULT 0,
    ADD COLUMN granted_seq   bigint NOT NULL DEFAULT 0,
    ADD COLUMN caught_up_to  double precision NOT NULL DEFAULT 0;
CREATE SEQUENCE class_grant_seq;

CREATE FUNCTION note_class_grant() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.pass_at_grant := OLD.pass;
    NEW.granted_seq := nextval('class_grant_seq');
    RETURN NEW;
END;
$$;

CREATE TRIGGER class_grant BEFORE UPDATE ON class_state FOR EACH ROW
    WHEN (NEW.pass > OLD.pass AND NEW.caught_up_to = OLD.caught_up_to)
    EXECUTE FUNCTION note_class_grant();
