-- The round-robin round a returning download re-enters (R-SESS-9, R-TICKET-1), as the
-- in-memory fair queue chooses it (ADR 0016).
--
-- Under `ordered` a waiter's order key is a round tag: a principal's k-th waiter takes
-- the turn k rounds after the current one (class_state.virtual_time). A download that
-- comes back with an old arrival — a ticket, a pause, a yield, a promotion by aging —
-- must queue behind those served from before it and ahead of those who came after it,
-- so it takes the round that was current when it ARRIVED, not the current one. The
-- rounds' history is kept for that: every rise of a class's virtual time, with the
-- queue time it happened at, for 20 minutes (longer than a ticket is accepted, 15;
-- the policy's ROUND_HISTORY_SECONDS). An arrival older than the history takes the
-- first round.
--
-- Queue time is the scheduler's clock, passed in (the database's in production): the
-- statements that raise a virtual time set class_state.advanced_at with it, and the
-- trigger below records the rise. A virtual time raised without a time (a process of
-- an older version during a rolling upgrade) is not recorded: arrivals compare with
-- the rises that were.

ALTER TABLE class_state ADD COLUMN advanced_at double precision;

CREATE TABLE class_round_history (
    queue_rank   smallint NOT NULL,
    advanced_at  double precision NOT NULL,
    virtual_time bigint NOT NULL,
    PRIMARY KEY (queue_rank, advanced_at, virtual_time)
);

CREATE FUNCTION note_round_advance() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO class_round_history (queue_rank, advanced_at, virtual_time)
    VALUES (NEW.queue_rank, NEW.advanced_at, NEW.virtual_time)
    ON CONFLICT DO NOTHING;
    -- Forgotten as the in-memory history forgets: when a new rise is recorded.
    DELETE FROM class_round_history AS h
    WHERE h.queue_rank = NEW.queue_rank AND h.advanced_at < NEW.advanced_at - 1200;
    RETURN NULL;
END
$$;

CREATE TRIGGER class_round_advance
AFTER UPDATE OF virtual_time ON class_state
FOR EACH ROW
WHEN (NEW.virtual_time > OLD.virtual_time AND NEW.advanced_at IS NOT NULL)
EXECUTE FUNCTION note_round_advance();

-- The round tag of a waiter entering class p_rank with arrival p_arrival, and the
-- principal's last tag in that class brought up to date (the fair queue's rule):
-- an arrival before the class's last rise takes the round current at its arrival
-- (plus one) and leaves the principal's later turns as they are; any other takes the
-- principal's next turn, one round after the later of the current round and its last.
CREATE FUNCTION next_round_tag(p_rank smallint, p_principal text, p_arrival double precision)
RETURNS bigint
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    v_virtual_time bigint;
    v_advanced_at double precision;
    v_tag bigint;
BEGIN
    SELECT c.virtual_time, c.advanced_at INTO v_virtual_time, v_advanced_at
    FROM class_state AS c WHERE c.queue_rank = p_rank;
    IF v_advanced_at IS NOT NULL AND p_arrival < v_advanced_at THEN
        v_tag := coalesce((SELECT h.virtual_time FROM class_round_history AS h
                           WHERE h.queue_rank = p_rank AND h.advanced_at <= p_arrival
                           ORDER BY h.advanced_at DESC, h.virtual_time DESC
                           LIMIT 1), 0) + 1;
        INSERT INTO principal_round AS r (queue_rank, principal, last_tag)
        VALUES (p_rank, p_principal, v_tag)
        ON CONFLICT ON CONSTRAINT principal_round_pkey DO UPDATE
        SET last_tag = greatest(r.last_tag, v_tag);
    ELSE
        INSERT INTO principal_round AS r (queue_rank, principal, last_tag)
        VALUES (p_rank, p_principal, v_virtual_time + 1)
        ON CONFLICT ON CONSTRAINT principal_round_pkey DO UPDATE
        SET last_tag = greatest(r.last_tag, v_virtual_time) + 1
        RETURNING r.last_tag INTO v_tag;
    END IF;
    RETURN v_tag;
END
$$;

-- Aging moves waiters one class up in the order the in-memory queue moves them (the
-- caller sorts the keys: release-bound first, then by promotion time and arrival
-- order), because under `ordered` each takes a turn of its new class and turns
-- given one after another depend on their order.
CREATE FUNCTION promote_waiters(
    p_keys bytea[], p_promote_at double precision[], p_round_tag boolean
) RETURNS void
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    i integer;
BEGIN
    FOR i IN 1 .. coalesce(array_length(p_keys, 1), 0) LOOP
        UPDATE download_session AS d
        SET queue_rank = d.queue_rank - 1,
            order_key = CASE WHEN p_round_tag
                THEN next_round_tag((d.queue_rank - 1)::smallint, d.principal, d.arrival)
                ELSE d.order_key END,
            promote_at = p_promote_at[i]
        WHERE d.session_key = p_keys[i] AND d.state = 0;
    END LOOP;
END
$$;

-- A switch to `ordered` (or a new aging period) re-keys the waiters as the in-memory
-- queue re-adds them: the principals' turns start afresh, and the waiters take their
-- rounds one after another by arrival, an old arrival the round of its arrival.
CREATE FUNCTION rekey_round_tags() RETURNS void
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    w record;
BEGIN
    DELETE FROM principal_round;
    FOR w IN SELECT d.session_key, d.queue_rank, d.principal, d.arrival
             FROM download_session AS d WHERE d.state = 0
             ORDER BY d.arrival, d.seq LOOP
        UPDATE download_session AS d
        SET order_key = next_round_tag(w.queue_rank, w.principal, w.arrival)
        WHERE d.session_key = w.session_key;
    END LOOP;
END
$$;

-- ----------------------------------------------------------------------- admission
-- As migration 0004, with the fair queue's rules where they differed:
-- * the round tag from next_round_tag (a ticket's old arrival takes the round of its
--   arrival), and a principal without sessions starts its turns afresh (the in-memory
--   queue forgets a principal with its last session);
-- * aging counts from the arrival, a ticket's old one included;
-- * a grant that moves the round on records when (class_state.advanced_at).
-- p_old_arrival is no longer read: the arrival itself says whether it is old.
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
        p_arrival, p_arrival_ms, v_order_key, p_arrival, p_promote_at, p_now,
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
            advanced_at = CASE WHEN p_round_tag AND v_order_key::bigint > c.virtual_time
                THEN p_now ELSE c.advanced_at END,
            pass = c.pass + p_round_step
        WHERE c.queue_rank = p_rank;
    END IF;
END
$$;
