-- R-SESS-11 across processes: at most rangesPerSession responses of one session run at
-- once, however many processes behind a load balancer serve them (ADR 0019).
--
-- Each process serving a session holds a share of the session's range budget; a range
-- runs only within its process's share, so the shares' sum bounds the session. The
-- process that claims the slot starts with a share of one (the range it serves at
-- once) and grows it one at a time; a process that serves the session alone keeps its
-- share between ranges, so its further ranges need no round trip. A row of ranges = 0
-- is a process that asked and was refused: the others see the contention and hand back
-- what they do not use.
CREATE TABLE range_share (
    slot_no     integer NOT NULL REFERENCES download_slot (slot_no) ON DELETE CASCADE,
    lease_token bigint  NOT NULL,
    node_id     text    NOT NULL,
    ranges      integer NOT NULL CHECK (ranges >= 0),
    PRIMARY KEY (slot_no, node_id)
);

-- A new lease of a slot (a claim) starts with the claimant's share of one; a released
-- slot has no shares. One trigger, so every claim (CLAIM_SLOT, admit_session, a
-- resumption) and every release (completion, idle, reaping, a yield) agrees.
CREATE FUNCTION slot_range_shares() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM range_share WHERE slot_no = NEW.slot_no;
    IF NEW.session_key IS NOT NULL THEN
        INSERT INTO range_share (slot_no, lease_token, node_id, ranges)
        VALUES (NEW.slot_no, NEW.lease_token, coalesce(NEW.holder_node, ''), 1);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER slot_range_shares
AFTER UPDATE OF lease_token, session_key ON download_slot
FOR EACH ROW
WHEN (OLD.lease_token IS DISTINCT FROM NEW.lease_token
      OR OLD.session_key IS DISTINCT FROM NEW.session_key)
EXECUTE FUNCTION slot_range_shares();

-- One more range for p_node's share of the lease (p_slot, p_token), if the shares of
-- the live processes leave room under p_limit. Refused, the process's row stays (with
-- what it had, at least 0) so the others see that it waits. Returns the share granted
-- (0 when refused or the lease is gone) and whether another process holds a share or
-- waits for one. The slot row is locked first, so concurrent takers count one after
-- another; each statement below reads what the previous taker committed (plpgsql, read
-- committed). A process whose heartbeat stopped for a lease period counts no more.
CREATE FUNCTION take_range(p_slot integer, p_token bigint, p_node text, p_limit integer,
                           p_dead_after float8)
RETURNS TABLE (granted integer, contended boolean)
LANGUAGE plpgsql AS $$
DECLARE
    v_taken integer;
    v_others boolean;
    v_granted integer := 0;
BEGIN
    PERFORM 1 FROM download_slot
    WHERE slot_no = p_slot AND lease_token = p_token AND lease_expires_at > now()
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 0, false;
        RETURN;
    END IF;
    SELECT coalesce(sum(r.ranges), 0)::integer, bool_or(r.node_id <> p_node)
    INTO v_taken, v_others
    FROM range_share AS r
    LEFT JOIN fleet_node AS n ON n.node_id = r.node_id
    WHERE r.slot_no = p_slot AND r.lease_token = p_token
      AND (r.node_id = p_node
           OR n.heartbeat_at >= now() - make_interval(secs => p_dead_after));
    IF v_taken < p_limit THEN
        v_granted := 1;
    END IF;
    INSERT INTO range_share AS r (slot_no, lease_token, node_id, ranges)
    VALUES (p_slot, p_token, p_node, v_granted)
    ON CONFLICT (slot_no, node_id) DO UPDATE
    SET ranges = CASE WHEN r.lease_token = p_token THEN r.ranges ELSE 0 END + v_granted,
        lease_token = p_token;
    RETURN QUERY SELECT v_granted, coalesce(v_others, false);
END
$$;
