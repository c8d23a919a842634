-- Three changes for the queue under bursts and poll storms (issue #26).
--
-- 1. An open class's newcomer passes the waiters of classes outside their windows
-- (R-WIN-2; ADR 0021). admit_session gave a newcomer a free slot only when nobody at
-- all waited. A waiter of a class outside its windows takes no slot (or only its
-- share), so an open class's newcomer waited behind it for the next mark although
-- slots were free; and a closed class's newcomer, queued by the function before it
-- claimed its share under the class's lock, made a concurrent open newcomer wait at
-- random. The caller now passes the ranks of the classes closed now (p_passable, empty
-- for a closed newcomer or without windows): their waiters do not count, except one
-- that aged into such a rank from an open class (a windowed class never ages). Those
-- few rows get a partial index of their own, so the check reads two index ranges
-- however many closed waiters there are. The dead parameter p_old_arrival goes.
--
-- 2. One index of the waiting order (ADR 0020). download_session_queue (queue_rank,
-- order_key, arrival, seq) and download_session_place (queue_rank, place) hold the
-- same order, place being ARRAY[order_key, arrival, seq]. Without statistics (a table
-- filled by a burst before autovacuum analysed it) the planner could not tell them
-- apart and counted a place through download_session_queue, its range on queue_rank
-- alone and a filter on place: a poll at the back of 32,768 waiting read 1,191 buffers
-- instead of about 35, unchanged until the table was analysed. With one index whose
-- leading columns fit every read of the order, no plan depends on pg_stat; each
-- waiter's insert and move writes one index entry fewer. A newcomer's own count
-- compares places too (a row comparison stops only where order_key changes).
DROP INDEX download_session_queue;

-- 3. The marked waiters in the leader's row (ADR 0029). A process answers a poll that
-- comes well before its checkAt from the answer it gave last, unless the waiter is
-- marked while a slot is free; it learns the marks with its snapshot of queue_state,
-- which the leader now writes at the end of each tick (about twice the free slots).
-- Read from download_session instead, the marks were a scan of the table whenever the
-- planner had no statistics of it.
ALTER TABLE queue_state ADD COLUMN marked bytea[] NOT NULL DEFAULT '{}';

CREATE INDEX download_session_aged ON download_session (queue_rank)
    WHERE state = 0 AND queue_rank <> base_class;

DROP FUNCTION admit_session(
    bytea, text, smallint, boolean, bigint, double precision, bigint, boolean,
    double precision, double precision, double precision, double precision,
    double precision, bigint, bigint, integer, boolean, integer, text,
    double precision, boolean, double precision, integer, text, text);

CREATE FUNCTION admit_session(
    p_key bytea,
    p_principal text,
    p_rank smallint,
    p_has_id boolean,
    p_size bigint,
    p_arrival double precision,
    p_arrival_ms bigint,
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
    p_count_cap integer,
    p_object_id text,
    p_download_id text,
    p_passable smallint[]
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
    v_principal_sessions bigint;
    v_principal_known boolean;
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
    SELECT l.sessions INTO v_principal_sessions FROM principal_load AS l
    WHERE l.principal = p_principal;
    v_principal_known := FOUND;
    v_principal_sessions := coalesce(v_principal_sessions, 0) - principal_gone(p_principal);
    IF v_principal_sessions >= p_per_principal THEN
        outcome := 'principal_limit';
        RETURN NEXT;
        RETURN;
    END IF;

    IF v_order_key IS NULL THEN
        -- A principal the tick forgot (forget_old_rounds) has no turns left to forget.
        IF v_principal_known AND v_principal_sessions <= 0 THEN
            DELETE FROM principal_round AS r
            WHERE r.queue_rank IN (0, 1, 2, 3) AND r.principal = p_principal;
        END IF;
        v_order_key := next_round_tag(p_rank, p_principal, p_arrival);
    END IF;

    -- Nobody waits whom the newcomer must not pass: a waiter of a rank not passable,
    -- or one that aged into a passable rank from an open class (download_session_aged).
    IF NOT EXISTS (
            SELECT 1 FROM download_session AS w
            WHERE w.state = 0
              AND w.queue_rank = ANY (ARRAY(
                  SELECT r::smallint FROM generate_series(0, 3) AS r
                  WHERE r <> ALL (p_passable))))
       AND NOT EXISTS (
            SELECT 1 FROM download_session AS w
            WHERE w.state = 0 AND w.queue_rank <> w.base_class
              AND w.queue_rank = ANY (p_passable)) THEN
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
        check_at, no_show_at, last_activity, slot_since, object_id, download_id)
    VALUES (p_key, p_principal, p_rank, p_rank, p_has_id, p_size,
        CASE WHEN v_slot IS NULL THEN 0 ELSE 1 END,
        p_arrival, p_arrival_ms, v_order_key, p_arrival, p_promote_at, p_now,
        p_check_at, p_no_show_at, p_now,
        CASE WHEN v_slot IS NULL THEN NULL ELSE p_now END, p_object_id, p_download_id)
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
                      AND w.place < d.place
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
            advanced_at = CASE WHEN p_round_tag AND v_order_key::bigint > c.virtual_time
                THEN p_now ELSE c.advanced_at END,
            pass = c.pass + p_round_step
        WHERE c.queue_rank = p_rank;
    END IF;
END
$$;
