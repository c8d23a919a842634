-- The slots of the shared queue and their leases (ADR 0010).
--
-- Every statement that changes a slot names the fencing token it expects: a holder
-- with an old token changes nothing (R-PG-3). Lease times come from the database
-- clock (now()), queue times are fleet seconds passed in by the caller.

-- name: ensure_slots
INSERT INTO download_slot (slot_no)
SELECT generate_series(0, $1::int - 1)
ON CONFLICT (slot_no) DO NOTHING

-- name: analyze_slots
-- The slot table is tiny and changes size only with ensure_slots: without statistics
-- the planner would join it to the sessions the wrong way round until autovacuum gets
-- to it.
ANALYZE download_slot

-- name: admit_session
-- A session's admission in one round trip: the stored session if there is one, else a
-- newcomer checked against the bounds, given its turn, inserted, and either given a
-- slot (nobody waits whom it must not pass) or counted into its place. The function
-- (migration 0003, ADR 0011; its round-robin turn and aging as in memory since
-- migration 0007) runs the steps of session_with_lease, round_tag, insert_session,
-- others_waiting, claim_slot and advance_round, in that order, and counts a waiting
-- newcomer's place as position does, up to a cap; the outcomes are tested in
-- tests/postgres/test_one_round_trip.py. $23 and $24, the object and the client's
-- download id, are stored for the principal's own downloads page (migration 0011);
-- $25 are the ranks of the classes closed now, whose waiters an open class's newcomer
-- passes (migration 0013).
SELECT * FROM admit_session(
    $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12,
    $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25::smallint[])

-- name: claim_slot
-- One statement, exactly one winner per slot: SKIP LOCKED lets concurrent claims take
-- different free rows instead of queueing on the same one, and only rows below the
-- limit qualify, so the number of held slots can never exceed `sessions`. Rows below
-- `reserve` are for interactive sessions only (R-CLASS-3); interactive sessions take
-- them last. The session update in the same statement keeps state and slot in step;
-- UNIQUE(session_key) makes a second concurrent claim of one session fail.
-- After `sessions` was lowered, as many free slots stay free as sessions still hold
-- slots above the new limit (slot_claimable, migration 0004): nothing is granted
-- above the limit while those sessions keep their slots (R-SET-3, R-PG-2).
-- $8, when not NULL, is how many slots the session's base class $9 may hold: its
-- share outside its windows (R-WIN-2), counted over the held slots (at most
-- `sessions` rows). Concurrent claims of such a class take lock_class_claims first.
-- has_id tells whose estimate the wait scores: a protocol client's or a third-party
-- tool's (issue #28).
WITH above AS (
    SELECT count(*) AS held FROM download_slot WHERE slot_no >= $2 AND session_key IS NOT NULL
), free AS (
    SELECT slot_no FROM download_slot
    WHERE session_key IS NULL AND slot_no < $2 AND ($3 OR slot_no >= $4)
      AND slot_claimable(slot_no, $2, $3, $4, (SELECT held FROM above))
      AND ($8::int IS NULL OR $8::int > (
          SELECT count(*) FROM download_slot AS h
          JOIN download_session AS c ON c.session_key = h.session_key
          WHERE c.base_class = $9::smallint))
    ORDER BY (slot_no < $4), slot_no
    FOR UPDATE SKIP LOCKED
    LIMIT 1
), claimed AS (
    UPDATE download_slot AS s
    SET session_key = $1, lease_token = nextval('lease_token_seq'), holder_node = $5,
        lease_expires_at = now() + make_interval(secs => $6), claimed_at = now()
    FROM free WHERE s.slot_no = free.slot_no
    RETURNING s.slot_no, s.lease_token,
              extract(epoch FROM s.lease_expires_at - now())::float8 AS lease_left
), activated AS (
    UPDATE download_session AS d
    SET state = 1, marked = false, mark_backup = false, slot_since = $7,
        last_activity = $7, interrupted = false
    FROM claimed WHERE d.session_key = $1
    RETURNING d.queue_rank, d.order_key, d.waiting_since, d.first_estimate,
              d.first_estimate_at, d.has_id
)
SELECT claimed.slot_no, claimed.lease_token, claimed.lease_left,
       activated.queue_rank, activated.order_key, activated.waiting_since,
       activated.first_estimate, activated.first_estimate_at, activated.has_id
FROM claimed, activated

-- name: lock_class_claims
-- Claims of a class outside its windows with a share of slots (R-WIN-2) take turns,
-- so that two processes counting its slots at once do not both take the last one.
-- Held until the claiming transaction ends; other claims never take it.
SELECT pg_advisory_xact_lock(hashtext(current_schema() || '.class_window'), $1::int)

-- name: advance_round
-- A grant moves its class's round on to the granted waiter's tag and its pass by one
-- stride; a round that moves on records when (queue time $4), for the rounds' history
-- returning arrivals are placed by (migration 0007).
UPDATE class_state
SET virtual_time = greatest(virtual_time, $2::bigint), pass = pass + $3,
    advanced_at = CASE WHEN $2::bigint > virtual_time THEN $4::float8 ELSE advanced_at END
WHERE queue_rank = $1

-- name: take_over_lease
-- Taking over the renewal of a valid lease another process (or nobody) renews: the
-- session's client now talks to this process. Fenced and only while still valid.
UPDATE download_slot
SET holder_node = $3, lease_expires_at = now() + make_interval(secs => $4)
WHERE session_key = $1 AND lease_token = $2 AND lease_expires_at > now()
RETURNING extract(epoch FROM lease_expires_at - now())::float8 AS lease_left

-- name: renew_leases
-- A holder may renew a lease that ran out while the database was slow, as long as its
-- token is still the slot's: nobody else has been granted the slot meanwhile.
UPDATE download_slot AS s
SET lease_expires_at = now() + make_interval(secs => $3)
FROM unnest($1::int[], $2::bigint[]) AS held(slot_no, token)
WHERE s.slot_no = held.slot_no AND s.lease_token = held.token AND s.holder_node = $4
RETURNING s.slot_no, s.lease_token,
          extract(epoch FROM s.lease_expires_at - now())::float8 AS lease_left,
          (SELECT d.yield_requested FROM download_session AS d
           WHERE d.session_key = s.session_key) AS yield_requested,
          EXISTS (SELECT 1 FROM range_share AS r
                  WHERE r.slot_no = s.slot_no AND r.lease_token = s.lease_token
                    AND r.node_id <> $4) AS contended

-- name: release_slot
UPDATE download_slot
SET session_key = NULL, holder_node = NULL, lease_expires_at = NULL, claimed_at = NULL
WHERE slot_no = $1 AND lease_token = $2 AND session_key = $3
RETURNING slot_no

-- name: take_range
-- R-SESS-11 across processes (migration 0006, ADR 0019): one more range for this
-- process's share of a session's lease, if the live processes' shares leave room.
SELECT granted, contended FROM take_range($1, $2, $3, $4, $5)

-- name: give_back_ranges
-- Unused shares handed back, for several leases at once: a share that reaches nothing
-- is deleted, so a row of 0 keeps meaning "refused and waiting" (contention).
WITH back AS (
    SELECT * FROM unnest($1::int[], $2::bigint[], $3::int[]) AS b(slot_no, token, ranges)
), gone AS (
    DELETE FROM range_share AS r USING back
    WHERE r.slot_no = back.slot_no AND r.lease_token = back.token AND r.node_id = $4
      AND r.ranges <= back.ranges
    RETURNING r.slot_no
)
UPDATE range_share AS r SET ranges = r.ranges - back.ranges
FROM back
WHERE r.slot_no = back.slot_no AND r.lease_token = back.token AND r.node_id = $4
  AND r.ranges > back.ranges
