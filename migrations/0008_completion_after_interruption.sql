-- A session completes when its last range in flight ends, however it ends (R-SESS-8),
-- as in memory: covered from its start to the last byte with nothing in flight.
--
-- Until this migration only record_delivery judged completion. A client that read a
-- range again (a retry, a second reader of the same download) and dropped it after
-- every byte had already arrived left a session whose last range ended with an
-- interruption: in memory it completed and freed its slot at once; on PostgreSQL it
-- kept the slot until the idle release paused it (the tail hold, 5 s of queue time),
-- so a waiter marked for that slot was queued where memory admitted it.
--
-- The completion steps (release the slot, fenced; delete the session; count the
-- completion) move into complete_session, which both outcomes of a range call.

CREATE FUNCTION complete_session(
    p_key bytea,
    p_token bigint,
    p_slot_no integer,
    p_now double precision
) RETURNS text
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    v_principal text;
BEGIN
    UPDATE download_slot AS s
    SET session_key = NULL, holder_node = NULL, lease_expires_at = NULL, claimed_at = NULL
    WHERE s.slot_no = p_slot_no AND s.lease_token = p_token AND s.session_key = p_key;
    IF NOT FOUND THEN
        RETURN 'recorded';
    END IF;
    DELETE FROM download_session AS d WHERE d.session_key = p_key
    RETURNING d.principal INTO v_principal;
    INSERT INTO principal_completed AS c (principal, sessions) VALUES (v_principal, 1)
    ON CONFLICT ON CONSTRAINT principal_completed_pkey DO UPDATE SET sessions = c.sessions + 1;
    -- completed_total is also the fleet's count of completed sessions (queue_gone).
    UPDATE queue_state AS q
    SET completed_total = q.completed_total + 1, last_release = p_now;
    RETURN 'completed';
END
$$;

-- As migration 0004, with the completion steps in complete_session.
CREATE OR REPLACE FUNCTION record_delivery(
    p_key bytea,
    p_token bigint,
    p_start bigint,
    p_end bigint,
    p_counts_start boolean,
    p_bounded boolean,
    p_now double precision,
    p_release boolean,
    p_slot_no integer
) RETURNS text
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    v_slot integer;
    v_complete boolean;
BEGIN
    WITH lease AS (
        SELECT s.slot_no FROM download_slot AS s
        WHERE s.session_key = p_key AND s.lease_token = p_token
    )
    UPDATE download_session AS d
    SET delivered = bounded_delivered(
            d.delivered + int8multirange(int8range(p_start, p_end)), 64),
        start_offset = CASE WHEN p_counts_start AND (
                NOT p_bounded OR isempty(d.delivered) OR upper(d.delivered) < d.object_size
                OR p_end < (SELECT max(lower(r)) FROM unnest(d.delivered) AS r)
                OR p_start = 0)
            THEN least(coalesce(d.start_offset, p_start), p_start)
            ELSE d.start_offset END,
        last_activity = p_now, interrupted = false
    FROM lease
    WHERE d.session_key = p_key
    RETURNING lease.slot_no,
        d.start_offset IS NOT NULL
            AND d.delivered @> int8range(d.start_offset, d.object_size)
    INTO v_slot, v_complete;
    IF v_slot IS NULL THEN
        RETURN 'fenced';
    END IF;
    PERFORM set_config('synchronous_commit', 'off', true);
    IF NOT v_complete OR NOT p_release THEN
        RETURN 'recorded';
    END IF;
    RETURN complete_session(p_key, p_token, p_slot_no, p_now);
END
$$;

-- An interrupted or failed range, fenced: the session's activity, and its short hold
-- when nothing else of it is in flight here (p_release); a session whose delivered
-- ranges already cover it completes then, as after a delivery. Answers 'fenced',
-- 'recorded' or 'completed'.
CREATE FUNCTION record_interruption(
    p_key bytea,
    p_token bigint,
    p_now double precision,
    p_release boolean,
    p_slot_no integer
) RETURNS text
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    v_slot integer;
    v_complete boolean;
BEGIN
    UPDATE download_session AS d
    SET last_activity = p_now, interrupted = d.interrupted OR p_release
    FROM download_slot AS s
    WHERE d.session_key = p_key AND s.session_key = p_key AND s.lease_token = p_token
    RETURNING s.slot_no,
        d.start_offset IS NOT NULL
            AND d.delivered @> int8range(d.start_offset, d.object_size)
    INTO v_slot, v_complete;
    IF v_slot IS NULL THEN
        RETURN 'fenced';
    END IF;
    IF NOT v_complete OR NOT p_release THEN
        RETURN 'recorded';
    END IF;
    RETURN complete_session(p_key, p_token, p_slot_no, p_now);
END
$$;
