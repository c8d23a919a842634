-- Preemption (R-PREEMPT-1, R-PREEMPT-2): who may be asked to yield its slot, and how a
-- yielder waits again.

-- name: unblock_yielders
-- R-PREEMPT-2: a yielder waits behind the head it yielded to only while that head waits.
-- The yielders are read in the order of download_session_blocked, a few at a time (at
-- most one preemption a tick makes one): without statistics the planner takes
-- `blocked_by IS NOT NULL` for nearly every row, and filtered a whole queue through
-- another index each tick (issue #26); an ordered, limited read only that index serves.
UPDATE download_session AS w SET blocked_by = NULL
WHERE w.session_key IN (
        SELECT y.session_key FROM download_session AS y
        WHERE y.blocked_by IS NOT NULL
        ORDER BY y.blocked_by
        LIMIT 256)
  AND w.state = 0
  AND NOT EXISTS (SELECT 1 FROM download_session AS h
                  WHERE h.session_key = w.blocked_by AND h.state = 0)

-- name: cancel_stale_yields
-- A yield no longer needed: its head is gone or got a slot another way.
UPDATE download_session AS v SET yield_requested = false, blocked_by = NULL
WHERE v.state = 1 AND v.yield_requested
  AND NOT EXISTS (SELECT 1 FROM download_session AS h
                  WHERE h.session_key = v.blocked_by AND h.state = 0)

-- name: pending_yield
SELECT EXISTS (SELECT 1 FROM download_session WHERE state = 1 AND yield_requested)

-- name: preemption_candidates
-- Every active session: the policy's `choose_victim` decides who may yield.
SELECT d.session_key, d.principal, d.base_class, d.slot_since, d.has_id, d.yield_requested
FROM download_slot AS s JOIN download_session AS d ON d.session_key = s.session_key

-- name: request_yield
WITH asked AS (
    UPDATE download_session SET yield_requested = true, blocked_by = $2
    WHERE session_key = $1 AND state = 1 AND NOT yield_requested
    RETURNING 1
)
UPDATE queue_state SET preemptions_total = preemptions_total + (SELECT count(*) FROM asked)

-- name: requeue_yielder
-- The yielder waits again with its arrival but without its aging (R-PREEMPT-2), and the
-- head it yielded to is marked at once so that it takes the slot on its next poll,
-- early or not: the processes' snapshots learn the mark with the leader's (ADR 0029).
WITH yielder AS (
    UPDATE download_session
    SET state = 0, yield_requested = false, queue_rank = base_class, order_key = $2,
        aging_since = $3, promote_at = $4, waiting_since = $3, check_at = $5, no_show_at = $6,
        marked = false, mark_backup = false, first_estimate = NULL, first_estimate_at = NULL
    WHERE session_key = $1 AND state = 1
    RETURNING blocked_by
), head AS (
    UPDATE download_session AS h SET marked = true, mark_backup = false
    FROM yielder WHERE h.session_key = yielder.blocked_by AND h.state = 0
    RETURNING h.session_key
)
UPDATE queue_state SET marked = marked || ARRAY(SELECT session_key FROM head)
WHERE EXISTS (SELECT 1 FROM head)

-- name: active_by_principal
SELECT d.principal, count(*) FROM download_slot AS s
JOIN download_session AS d ON d.session_key = s.session_key
GROUP BY d.principal

-- name: under_share_waiting
SELECT EXISTS (SELECT 1 FROM download_session
               WHERE state = 0 AND NOT (principal = ANY($1::text[])))

-- name: claimant_share
-- R-CLASS-5 when a marked waiter comes for its slot, as in memory: the slots its
-- principal ($1) holds now, and whether a waiter of a principal below the share ($2)
-- waits now. The marks are a tick old; a waiter of another principal may have arrived
-- since, or the principal may have taken a slot with another download.
WITH held AS (
    SELECT d.principal, count(*) AS n FROM download_slot AS s
    JOIN download_session AS d ON d.session_key = s.session_key
    GROUP BY d.principal
)
SELECT coalesce((SELECT n FROM held WHERE held.principal = $1), 0) AS principal_active,
       EXISTS (SELECT 1 FROM download_session AS w
               WHERE w.state = 0
                 AND coalesce((SELECT n FROM held WHERE held.principal = w.principal), 0)
                     < $2) AS contenders

-- name: session_blocked
-- R-PREEMPT-2 for a waiter that comes for a slot left free (issue #28): a yielder takes
-- none while the head it yielded to waits (the tick clears `blocked_by` after that).
SELECT blocked_by IS NOT NULL FROM download_session WHERE session_key = $1

-- name: marked_expected
-- Issue #28, as in memory (policy.marked_in_turn, keeps_its_turn): of the waiters the
-- tick marked before this one ($1), those still waiting, due within one poll period
-- ($3 seconds) either side of now ($2), and back (when their last Retry-After brings
-- them, back_at, or check_at when that was set since) before the next slot is expected
-- to free: the fewest bytes any running download still has to send, at $4 bytes per
-- second (a running session's share of the rate). Read from the slots as they are,
-- not the tick's finish table: that still names a session that ended since. $5: how
-- long after it is back the next slot must free for it to keep its turn (ADR 0043).
WITH soonest AS (
    SELECT min(greatest(0, d.object_size - coalesce(d.start_offset, d.start_hint, 0)
                           - {covered_bytes} - {in_flight_bytes})) AS bytes
    FROM download_slot AS s JOIN download_session AS d ON d.session_key = s.session_key
)
SELECT count(*) FROM download_session AS w, soonest
WHERE w.session_key = ANY($1::bytea[]) AND w.state = 0 AND w.marked
  AND w.check_at BETWEEN $2::float8 - $3::float8 AND $2::float8 + $3::float8
  AND (soonest.bytes IS NULL
       OR greatest(w.check_at, w.back_at) + $5::float8
          < $2::float8 + soonest.bytes / $4::float8)
