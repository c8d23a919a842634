-- One session's rows: its admission steps, its answers and the records of its ranges.
--
-- A session is `download_session` (one row per session key) and, while it is
-- active, the `download_slot` row that names it. Queue times are fleet seconds
-- passed in by the caller.

-- name: session_with_lease
SELECT d.state, d.marked, d.mark_backup, d.base_class, d.queue_rank, d.arrival,
       d.arrival_wall_ms, d.object_size, d.principal, d.yield_requested,
       s.slot_no, s.lease_token,
       extract(epoch FROM s.lease_expires_at - now())::float8 AS lease_left
FROM download_session AS d
LEFT JOIN download_slot AS s ON s.session_key = d.session_key
WHERE d.session_key = $1

-- name: others_waiting
SELECT EXISTS (SELECT 1 FROM download_session WHERE state = 0 AND session_key <> $1)

-- name: round_tag
-- The round-robin turn of a waiter entering a class under `ordered` (migration 0007,
-- next_round_tag): a principal's k-th waiter k rounds after the current one; an old
-- arrival (ticket, pause, yield) in the round that was current when it arrived.
SELECT next_round_tag($1::smallint, $2, $3::float8)

-- name: insert_session
-- The row a newcomer gets (admit_session inserts it; benchmarks fill queues with it).
INSERT INTO download_session (
    session_key, principal, base_class, queue_rank, has_id, object_size, state,
    arrival, arrival_wall_ms, order_key, aging_since, promote_at, waiting_since,
    check_at, no_show_at, last_activity)
VALUES ($1, $2, $3, $3, $4, $5, 0, $6, $7, $8, $9, $10, $9, $11, $12, $9)
ON CONFLICT (session_key) DO NOTHING
RETURNING seq

-- name: resume_paused
UPDATE download_session
SET state = 0, queue_rank = base_class, order_key = $2, aging_since = $3, promote_at = $4,
    waiting_since = $3, check_at = $5, no_show_at = $6, marked = false, mark_backup = false,
    paused_until = NULL, first_estimate = NULL, first_estimate_at = NULL
WHERE session_key = $1 AND state = 2

-- name: position
-- Everything a queued answer needs, its ticket's arrival included, in one round trip
-- (ADR 0020). The session's bucket (one index probe) says how many waited before it at
-- the leader's last fold; only the waiters of its own bucket ahead of it are counted,
-- at most about twice the bucket size. Near the head ($2 = the exact head) everyone
-- ahead is counted instead, so the waiters the next ticks can serve see their exact
-- place. Each count is one index range (waiting_between, migration 0009).
SELECT d.queue_rank, d.base_class, d.marked, d.first_estimate, d.arrival_wall_ms, d.seq,
       d.object_size,
       CASE WHEN coalesce(b.ahead, 0) < $2
            THEN waiting_between(d.queue_rank, '{-Infinity,-Infinity,-Infinity}', d.place)
            ELSE b.ahead + waiting_between(d.queue_rank, b.lo, d.place)
       END AS own_ahead
FROM download_session AS d
LEFT JOIN LATERAL place_bucket_of(d.queue_rank, d.place) AS b ON true
WHERE d.session_key = $1 AND d.state = 0

-- name: record_check
-- A poll's record of when to come back. Like a waiting newcomer's row (migration 0003),
-- its commit does not wait for the flush: lost with a crash of the server, the waiter's
-- older deadline stands, and a client judged a no-show by it comes back at its next
-- poll in its place (the queue ticket keeps the arrival). $6 is when its Retry-After
-- brings it back (migration 0018).
WITH unflushed AS (SELECT set_config('synchronous_commit', 'off', true))
UPDATE download_session
SET check_at = $2, no_show_at = $3, back_at = $6, first_estimate = coalesce(first_estimate, $4),
    first_estimate_at = CASE WHEN first_estimate IS NULL THEN $5 ELSE first_estimate_at END
WHERE session_key = $1 AND state = 0 AND EXISTS (SELECT 1 FROM unflushed)

-- name: record_delivery
-- Delivery of one range, fenced: nothing changes unless the lease named by the grant is
-- still the session's. The start of the download is decided as in memory (R-SESS-8).
-- When that makes the session complete and no other range of it is in flight, the same
-- statement releases the slot (fenced), deletes the session and counts the completion
-- (migration 0003, ADR 0011). Answers 'fenced', 'recorded' or 'completed'.
SELECT record_delivery($1, $2, $3, $4, $5, $6, $7, $8, $9)

-- name: record_interruption
-- An interrupted or failed range, fenced: activity, the short hold when nothing else of
-- the session is in flight here, and its completion when its delivered ranges already
-- cover it (R-SESS-8: however the last range ends; migration 0008). Answers 'fenced',
-- 'recorded' or 'completed', as record_delivery does.
SELECT record_interruption($1, $2, $3, $4, $5)

-- name: store_in_flight
-- What this process's responses still running have sent under each lease ($1 slots,
-- $2 tokens, $3 bytes), in its own range_share rows (issue #28, ADR 0033): one
-- statement for all its leases about once a second, and one when a response that
-- reported progress ends. Fenced by the token; $5 orders this process's writes, which
-- leave on different connections, so an older write arriving late changes nothing.
-- $6: when the counts were taken (ADR 0038: a pace is read up to then).
UPDATE range_share AS r SET in_flight_bytes = f.nbytes, in_flight_seq = $5, in_flight_at = $6
FROM unnest($1::int[], $2::bigint[], $3::bigint[]) AS f(slot_no, lease_token, nbytes)
WHERE r.slot_no = f.slot_no AND r.node_id = $4 AND r.lease_token = f.lease_token
  AND r.in_flight_seq < $5

-- name: note_release
UPDATE queue_state SET last_release = $1

-- name: touch_sessions
UPDATE download_session SET last_activity = greatest(last_activity, $2)
WHERE session_key = ANY($1::bytea[]) AND state = 1

-- name: note_start_hint
-- Where a newcomer's first request says its download starts (issue #28), until a
-- delivered range says it (R-SESS-8): only estimates read it.
UPDATE download_session SET start_hint = $2 WHERE session_key = $1 AND start_offset IS NULL
