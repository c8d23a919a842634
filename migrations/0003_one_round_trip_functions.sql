-- The two busiest calls, each in one round trip: a session's admission and a
-- delivered range (ADR 0011).

-- Admission of a session in one round trip (ADR 0011).
--
-- A newcomer used to cost ten statements, each a round trip and a turn of the
-- client's event loop: look the session up, check the limits, take the principal's
-- turn, insert the session, look for anyone waiting ahead, claim a slot, advance the
-- class's round, commit. This function does the same steps inside the database (the
-- free slot is chosen before the insert, so that an admitted session's row is written
-- once) and runs as one statement in autocommit: one round trip, one commit, and the
-- class's round row is locked only for the last few microseconds before that commit.
--
-- What it does not decide stays with the caller: the session's class and key, its
-- arrival (from a verified ticket), order key under smallest-first, the lease length
-- and every setting come in as arguments; a session that already exists comes back
-- as it is stored (outcome 'existing') and the caller answers it as before.
--
-- Outcomes: 'existing' (the columns of the stored session and its lease),
-- 'queue_full', 'principal_limit' (nothing written), 'raced' (another process
-- inserted the same session a moment ago), 'admitted' (claim columns set),
-- 'queued' (own_ahead, capped at p_count_cap, and marked set).
CREATE FUNCTION admit_session(
    p_key bytea,
    p_principal text,
    p_rank smallint,
    p_has_id boolean,
    p_size bigint,
    p_arrival double precision,
    p_arrival_ms bigint,
    p_old_arrival boolean,
    p_order_key double precision,      -- NULL: take the principal's next round-robin turn
    p_now double precision,
    p_promote_at double precision,
    p_check_at double precision,
    p_no_show_at double precision,
    p_queue_limit bigint,
    p_per_principal bigint,
    p_sessions integer,
    p_interactive boolean,
    p_reserve integer,
    p_node text,
    p_lease_seconds double precision,
    p_round_tag boolean,               -- ordered strategy: the class's round follows tags
    p_round_step double precision,     -- 1 / the class's weight
    p_count_cap integer
) RETURNS TABLE (
    outcome          text,
    state            smallint,
    marked           boolean,
    mark_backup      boolean,
    base_class       smallint,
    queue_rank       smallint,
    arrival          double precision,
    arrival_wall_ms  bigint,
    object_size      bigint,
    principal        text,
    yield_requested  boolean,
    slot_no          integer,
    lease_token      bigint,
    lease_left       double precision,
    order_key        double precision,
    waiting_since    double precision,
    first_estimate   double precision,
    own_ahead        bigint
)
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    v_session_count bigint;
    v_owned bigint;
    v_order_key double precision := p_order_key;
    v_seq bigint;
    v_virtual_time bigint;
    v_slot integer;
BEGIN
    -- The session as SESSION_WITH_LEASE reads it.
    RETURN QUERY
    SELECT 'existing'::text, d.state, d.marked, d.mark_backup, d.base_class, d.queue_rank,
           d.arrival, d.arrival_wall_ms, d.object_size, d.principal, d.yield_requested,
           s.slot_no, s.lease_token,
           extract(epoch FROM s.lease_expires_at - now())::float8,
           d.order_key, d.waiting_since, d.first_estimate, NULL::bigint
    FROM download_session AS d
    LEFT JOIN download_slot AS s ON s.session_key = d.session_key
    WHERE d.session_key = p_key;
    IF FOUND THEN
        RETURN;
    END IF;

    -- Bounds (R-BOUND): the fleet's count as the leader last took it, and the
    -- principal's own sessions as they are now.
    SELECT q.session_count INTO v_session_count FROM queue_state AS q;
    IF v_session_count >= p_queue_limit THEN
        outcome := 'queue_full';  -- every other column stays NULL
        RETURN NEXT;
        RETURN;
    END IF;
    SELECT count(*) INTO v_owned FROM download_session AS d WHERE d.principal = p_principal;
    IF v_owned >= p_per_principal THEN
        outcome := 'principal_limit';  -- every other column stays NULL
        RETURN NEXT;
        RETURN;
    END IF;

    -- The principal's next turn within its class (NEXT_TAG).
    IF v_order_key IS NULL THEN
        SELECT c.virtual_time INTO v_virtual_time FROM class_state AS c
        WHERE c.queue_rank = p_rank;
        INSERT INTO principal_round AS r (queue_rank, principal, last_tag)
        VALUES (p_rank, p_principal, v_virtual_time + 1)
        ON CONFLICT ON CONSTRAINT principal_round_pkey DO UPDATE
        SET last_tag = CASE WHEN p_old_arrival
            THEN greatest(r.last_tag, v_virtual_time + 1)
            ELSE greatest(r.last_tag, v_virtual_time) + 1
        END
        RETURNING CASE WHEN p_old_arrival THEN v_virtual_time + 1 ELSE r.last_tag END
        INTO v_order_key;
    END IF;

    -- Alone in the queue (OTHERS_WAITING): lock a free slot first (CLAIM_SLOT's choice),
    -- so that the session row is written once, already active, instead of inserted
    -- waiting and then updated (a second version of the row and of its index entries).
    IF NOT EXISTS (SELECT 1 FROM download_session AS w WHERE w.state = 0) THEN
        SELECT f.slot_no INTO v_slot FROM download_slot AS f
        WHERE f.session_key IS NULL AND f.slot_no < p_sessions
          AND (p_interactive OR f.slot_no >= p_reserve)
        ORDER BY (f.slot_no < p_reserve), f.slot_no
        FOR UPDATE SKIP LOCKED
        LIMIT 1;
    END IF;

    -- INSERT_SESSION (active when a slot was found). Another process may have inserted
    -- the same session a moment ago: then nothing is written, the locked slot included.
    INSERT INTO download_session AS d (
        session_key, principal, base_class, queue_rank, has_id, object_size, state,
        arrival, arrival_wall_ms, order_key, aging_since, promote_at, waiting_since,
        check_at, no_show_at, last_activity, slot_since)
    VALUES (p_key, p_principal, p_rank, p_rank, p_has_id, p_size,
        CASE WHEN v_slot IS NULL THEN 0 ELSE 1 END,
        p_arrival, p_arrival_ms, v_order_key, p_now, p_promote_at, p_now,
        p_check_at, p_no_show_at, p_now,
        CASE WHEN v_slot IS NULL THEN NULL ELSE p_now END)
    ON CONFLICT ON CONSTRAINT download_session_pkey DO NOTHING
    RETURNING d.seq INTO v_seq;
    IF v_seq IS NULL THEN
        outcome := 'raced';  -- every other column stays NULL
        RETURN NEXT;
        RETURN;
    END IF;

    -- The grant (CLAIM_SLOT's write: a new fencing token, the lease on the database
    -- clock), then the class's round (ADVANCE_ROUND) as the last write, so that its row
    -- lock lasts only until the commit.
    IF v_slot IS NOT NULL THEN
        RETURN QUERY
        UPDATE download_slot AS s
        SET session_key = p_key, lease_token = nextval('lease_token_seq'),
            holder_node = p_node,
            lease_expires_at = now() + make_interval(secs => p_lease_seconds),
            claimed_at = now()
        WHERE s.slot_no = v_slot
        RETURNING 'admitted'::text, 1::smallint, false, false, p_rank, p_rank,
                  p_arrival, p_arrival_ms, p_size, p_principal, false,
                  s.slot_no, s.lease_token,
                  extract(epoch FROM s.lease_expires_at - now())::float8,
                  v_order_key, p_now, NULL::float8, NULL::bigint;
        UPDATE class_state AS c
        SET virtual_time = CASE WHEN p_round_tag
                THEN greatest(c.virtual_time, v_order_key::bigint)
                ELSE c.virtual_time END,
            pass = c.pass + p_round_step
        WHERE c.queue_rank = p_rank;
        RETURN;
    END IF;

    -- Waiting: its place among its class as POSITION counts it, up to the cap.
    -- Only a grant must be on disk before the client hears of it. A waiting row lost
    -- with a crash of the server comes back at the client's next poll, in its place
    -- (the queue ticket keeps the arrival), so this commit does not wait for the flush.
    PERFORM set_config('synchronous_commit', 'off', true);
    RETURN QUERY
    SELECT 'queued'::text, d.state, d.marked, d.mark_backup, d.base_class, d.queue_rank,
           d.arrival, d.arrival_wall_ms, d.object_size, d.principal, d.yield_requested,
           NULL::integer, NULL::bigint, NULL::float8,
           d.order_key, d.waiting_since, d.first_estimate,
           (SELECT count(*) FROM (
                SELECT 1 FROM download_session AS w
                WHERE w.state = 0 AND w.queue_rank = d.queue_rank
                  AND (w.order_key, w.arrival, w.seq) < (d.order_key, d.arrival, d.seq)
                LIMIT p_count_cap) AS capped)
    FROM download_session AS d
    WHERE d.session_key = p_key;
END
$$;

-- A delivered range in one round trip (ADR 0011): the record (RECORD_DELIVERY, fenced
-- by the lease token), and when the session is complete and nothing else of it is in
-- flight, the release of its slot (RELEASE_SLOT, fenced), its deletion and the count
-- of completions. The fleet-wide counter row is written last, so its lock lasts only
-- until the commit. Outcomes: 'fenced' (the lease is not this token's any more),
-- 'recorded', 'completed'.
CREATE FUNCTION record_delivery(
    p_key bytea,
    p_token bigint,
    p_start bigint,
    p_end bigint,
    p_counts_start boolean,   -- not a read of the object's tail (R-SESS-8)
    p_bounded boolean,
    p_now double precision,
    p_release boolean,        -- no other range of the session is in flight here
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
    SET delivered = d.delivered + int8multirange(int8range(p_start, p_end)),
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
    -- A record or a release lost with a crash of the server only keeps a slot taken
    -- until the idle release frees it (never a slot given twice), so this commit does
    -- not wait for the flush; a later grant's commit flushes it anyway (WAL is in order).
    PERFORM set_config('synchronous_commit', 'off', true);
    IF NOT v_complete OR NOT p_release THEN
        RETURN 'recorded';
    END IF;
    UPDATE download_slot AS s
    SET session_key = NULL, holder_node = NULL, lease_expires_at = NULL, claimed_at = NULL
    WHERE s.slot_no = p_slot_no AND s.lease_token = p_token AND s.session_key = p_key;
    IF NOT FOUND THEN
        RETURN 'recorded';
    END IF;
    DELETE FROM download_session AS d WHERE d.session_key = p_key;
    UPDATE queue_state AS q
    SET completed_total = q.completed_total + 1, last_release = p_now;
    RETURN 'completed';
END
$$;
