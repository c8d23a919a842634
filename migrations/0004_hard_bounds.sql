-- Bounds that hold across processes, as the in-memory queue holds them in one
-- (R-RES-1, R-SESS-8, R-SET-3/R-PG-2).

-- ----------------------------------------------------------------------- session counts
-- queue_limit and queue_per_principal are checked against counts kept in the same
-- statement as the insert, never against a count the leader took a tick ago.
-- Each count is split by writer, so that no writer waits for another's locks: admissions
-- count what they add (``queue_admitted``, ``principal_load``, written as their last
-- writes), completions what they delete (``queue_state.completed_total``, which they
-- wrote already, and ``principal_completed``), the leader's tick what it deletes
-- (no-shows, expired pauses: ``queue_expired``, ``principal_expired``). Sessions =
-- admitted - completed - expired. An admission reads the other writers' rows as
-- committed, which can only make the count look higher, never lower.
-- The fleet's admissions are counted in 16 rows, one per first byte of the session key
-- modulo 16, so that admissions running at once raise different rows instead of queueing
-- on one row lock (``take_queue_place``). Sessions admitted = the sum of the rows.
CREATE TABLE queue_admitted (
    shard    smallint PRIMARY KEY CHECK (shard BETWEEN 0 AND 15),
    sessions bigint NOT NULL DEFAULT 0
);
INSERT INTO queue_admitted (shard) SELECT generate_series(0, 15);
UPDATE queue_admitted
SET sessions = (SELECT (SELECT count(*) FROM download_session) + q.completed_total
                FROM queue_state AS q)
WHERE shard = 0;

CREATE TABLE queue_expired (
    id       boolean PRIMARY KEY DEFAULT true CHECK (id),
    sessions bigint NOT NULL DEFAULT 0
);
INSERT INTO queue_expired DEFAULT VALUES;

CREATE TABLE principal_load (
    principal text PRIMARY KEY,
    sessions  bigint NOT NULL DEFAULT 0
);
INSERT INTO principal_load (principal, sessions)
SELECT principal, count(*) FROM download_session GROUP BY principal;

CREATE TABLE principal_completed (
    principal text PRIMARY KEY,
    sessions  bigint NOT NULL DEFAULT 0
);

CREATE TABLE principal_expired (
    principal text PRIMARY KEY,
    sessions  bigint NOT NULL DEFAULT 0
);

-- A principal's sessions as an admission may count them.
CREATE FUNCTION principal_gone(p_principal text) RETURNS bigint
LANGUAGE sql STABLE
AS $$
    SELECT coalesce((SELECT c.sessions FROM principal_completed AS c
                     WHERE c.principal = p_principal), 0)
         + coalesce((SELECT e.sessions FROM principal_expired AS e
                     WHERE e.principal = p_principal), 0)
$$;

-- The fleet's sessions as an admission may count them (committed admissions).
CREATE FUNCTION queue_admitted_total() RETURNS bigint
LANGUAGE sql STABLE
AS $$
    SELECT sum(a.sessions)::bigint FROM queue_admitted AS a
$$;

-- One more session in the fleet's count, only below ``p_limit`` (R-RES-1). Far from the
-- limit an admission raises one row and then counts with a fresh snapshot: what it cannot
-- see are admissions that hold another row and have not committed, at most one per other
-- row (15), so it admits when even those could not take the count beyond the limit.
-- Near the limit it gives its row back (the block's subtransaction releases the lock) and
-- locks all 16 rows in order, which makes the count exact; no admission holds one row
-- while waiting for another, so the two ways cannot deadlock.
CREATE FUNCTION take_queue_place(p_key bytea, p_limit bigint) RETURNS boolean
LANGUAGE plpgsql
AS $$
DECLARE
    v_shard smallint := get_byte(p_key, 0) % 16;
BEGIN
    BEGIN
        UPDATE queue_admitted AS a SET sessions = a.sessions + 1 WHERE a.shard = v_shard;
        IF queue_admitted_total() - queue_gone() + 15 <= p_limit THEN
            RETURN true;
        END IF;
        RAISE EXCEPTION USING ERRCODE = 'P0001', MESSAGE = 'near_queue_limit';
    EXCEPTION WHEN raise_exception THEN
        NULL;  -- near the limit: the row's increment and lock are rolled back
    END;
    PERFORM 1 FROM queue_admitted ORDER BY shard FOR UPDATE;
    IF queue_admitted_total() - queue_gone() >= p_limit THEN
        RETURN false;
    END IF;
    UPDATE queue_admitted AS a SET sessions = a.sessions + 1 WHERE a.shard = v_shard;
    RETURN true;
END
$$;

-- The fleet's sessions gone, as an admission may count them.
CREATE FUNCTION queue_gone() RETURNS bigint
LANGUAGE sql STABLE
AS $$
    SELECT (SELECT q.completed_total FROM queue_state AS q)
         + (SELECT e.sessions FROM queue_expired AS e)
$$;

-- ----------------------------------------------------------------------- delivered
-- R-SESS-8: at most 64 merged intervals; beyond that the shortest is forgotten (the
-- lowest of equally short ones), as DeliveredRanges does in memory. Forgetting can only
-- delay completion, never bring it forward. Ranges are added one at a time, so one
-- interval at most is over the bound.
CREATE FUNCTION bounded_delivered(p_ranges int8multirange, p_max integer)
RETURNS int8multirange
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN (SELECT count(*) FROM unnest(p_ranges)) <= p_max THEN p_ranges
        ELSE p_ranges - (SELECT int8multirange(r) FROM unnest(p_ranges) AS r
                         ORDER BY upper(r) - lower(r), lower(r) LIMIT 1)
    END
$$;

-- ----------------------------------------------------------------------- free slots
-- A free slot a claim may take (R-SET-3, R-PG-2). Slots at or above ``sessions`` are
-- never claimed; after ``sessions`` was lowered, sessions still holding such slots keep
-- them, and as many free slots below the limit as there are of those stay free: a
-- claim takes a slot only when at least that many free slots follow it in claim order
-- (non-interactive claims count the free slots they could take themselves). Claims take
-- slots in that order, so concurrent claims leave the last ones free.
CREATE FUNCTION slot_claimable(
    p_slot integer, p_sessions integer, p_interactive boolean, p_reserve integer,
    p_held_above bigint
) RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT p_held_above = 0 OR p_held_above <= (
        SELECT count(*) FROM download_slot AS a
        WHERE a.session_key IS NULL AND a.slot_no < p_sessions
          AND (p_interactive OR a.slot_no >= p_reserve)
          AND ((a.slot_no < p_reserve), a.slot_no) > ((p_slot < p_reserve), p_slot))
$$;

-- ----------------------------------------------------------------------- admission
-- As migration 0003 (ADR 0011), with the bounds checked twice: a first look at the
-- counts refuses without writing anything when the queue is already full, and the
-- counts are raised as the last writes, each only while below its limit. A concurrent
-- admission that took the last place in between makes the raise fail: the function
-- then raises 'queue_full' or 'principal_limit' (SQLSTATE P0001) and the whole
-- statement, insert and grant included, is rolled back.
CREATE OR REPLACE FUNCTION admit_session(
    p_key bytea,
    p_principal text,
    p_rank smallint,
    p_has_id boolean,
    p_size bigint,
    p_arrival double precision,
    p_arrival_ms bigint,
    p_old_arrival boolean,
    p_order_key double precision,
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
    p_round_tag boolean,
    p_round_step double precision,
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
    v_order_key double precision := p_order_key;
    v_seq bigint;
    v_virtual_time bigint;
    v_slot integer;
    v_held_above bigint;
BEGIN
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

    -- Bounds (R-RES-1), a first look: refused here, nothing is written.
    IF queue_admitted_total() - queue_gone() >= p_queue_limit THEN
        outcome := 'queue_full';
        RETURN NEXT;
        RETURN;
    END IF;
    IF coalesce((SELECT l.sessions FROM principal_load AS l WHERE l.principal = p_principal), 0)
            - principal_gone(p_principal) >= p_per_principal THEN
        outcome := 'principal_limit';
        RETURN NEXT;
        RETURN;
    END IF;

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

    IF NOT EXISTS (SELECT 1 FROM download_session AS w WHERE w.state = 0) THEN
        SELECT count(*) INTO v_held_above FROM download_slot AS h
        WHERE h.slot_no >= p_sessions AND h.session_key IS NOT NULL;
        SELECT f.slot_no INTO v_slot FROM download_slot AS f
        WHERE f.session_key IS NULL AND f.slot_no < p_sessions
          AND (p_interactive OR f.slot_no >= p_reserve)
          AND slot_claimable(f.slot_no, p_sessions, p_interactive, p_reserve, v_held_above)
        ORDER BY (f.slot_no < p_reserve), f.slot_no
        FOR UPDATE SKIP LOCKED
        LIMIT 1;
    END IF;

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
        outcome := 'raced';
        RETURN NEXT;
        RETURN;
    END IF;

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
    ELSE
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
    END IF;

    -- The counts, raised only below their limits (the principal's row first, then the
    -- fleet's, then the class's round). Only admissions write these rows.
    INSERT INTO principal_load AS l (principal, sessions) VALUES (p_principal, 1)
    ON CONFLICT ON CONSTRAINT principal_load_pkey DO UPDATE
    SET sessions = l.sessions + 1
    WHERE l.sessions - principal_gone(p_principal) < p_per_principal;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'principal_limit';
    END IF;
    IF NOT take_queue_place(p_key, p_queue_limit) THEN
        RAISE EXCEPTION 'queue_full';
    END IF;
    IF v_slot IS NOT NULL THEN
        UPDATE class_state AS c
        SET virtual_time = CASE WHEN p_round_tag
                THEN greatest(c.virtual_time, v_order_key::bigint)
                ELSE c.virtual_time END,
            pass = c.pass + p_round_step
        WHERE c.queue_rank = p_rank;
    END IF;
END
$$;

-- ----------------------------------------------------------------------- delivery
-- As migration 0003, with the delivered ranges bounded (R-SESS-8) and a completion
-- counted for its principal.
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
    v_principal text;
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
