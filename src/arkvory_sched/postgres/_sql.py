"""The SQL of the shared queue, in one place so the protocol can be read as a whole.

Conventions: ``$``-parameters only (never formatted values), unqualified table names
(each connection's ``search_path`` is the queue's schema), lease times from the
database clock (``now()``), queue times as fleet seconds passed in by the caller.
Every statement that changes a slot names the fencing token it expects: a holder with
an old token changes nothing (R-PG-3). See ADR 0010 for the failure analysis.
"""

from __future__ import annotations

from typing import Final

# ----------------------------------------------------------------------------- slots

ENSURE_SLOTS: Final = """
INSERT INTO download_slot (slot_no)
SELECT generate_series(0, $1::int - 1)
ON CONFLICT (slot_no) DO NOTHING
"""

# One statement, exactly one winner per slot: SKIP LOCKED lets concurrent claims take
# different free rows instead of queueing on the same one, and only rows below the
# limit qualify, so the number of held slots can never exceed ``sessions``. Rows below
# ``reserve`` are for interactive sessions only (R-CLASS-3); interactive sessions take
# them last. The session update in the same statement keeps state and slot in step;
# UNIQUE(session_key) makes a second concurrent claim of one session fail.
# The slot table is tiny and changes size only here: without statistics the planner
# would join it to the sessions the wrong way round until autovacuum gets to it.
ANALYZE_SLOTS: Final = "ANALYZE download_slot"

# A session's admission in one round trip: the stored session if there is one, else a
# newcomer checked against the bounds, given its turn, inserted, and either given a
# slot (alone in the queue) or counted into its place. The function (migration 0003,
# ADR 0011) runs the steps of SESSION_WITH_LEASE, NEXT_TAG, INSERT_SESSION,
# OTHERS_WAITING, CLAIM_SLOT and ADVANCE_ROUND below, in that order, and counts a
# waiting newcomer's place as POSITION does, up to a cap; the outcomes are tested in
# tests/postgres/test_one_round_trip.py.
ADMIT_SESSION: Final = """
SELECT * FROM admit_session(
    $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12,
    $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23)
"""

# After ``sessions`` was lowered, as many free slots stay free as sessions still hold
# slots above the new limit (``slot_claimable``, migration 0004): nothing is granted
# above the limit while those sessions keep their slots (R-SET-3, R-PG-2).
CLAIM_SLOT: Final = """
WITH above AS (
    SELECT count(*) AS held FROM download_slot WHERE slot_no >= $2 AND session_key IS NOT NULL
), free AS (
    SELECT slot_no FROM download_slot
    WHERE session_key IS NULL AND slot_no < $2 AND ($3 OR slot_no >= $4)
      AND slot_claimable(slot_no, $2, $3, $4, (SELECT held FROM above))
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
              d.first_estimate_at
)
SELECT claimed.slot_no, claimed.lease_token, claimed.lease_left,
       activated.queue_rank, activated.order_key, activated.waiting_since,
       activated.first_estimate, activated.first_estimate_at
FROM claimed, activated
"""

ADVANCE_ROUND: Final = """
UPDATE class_state
SET virtual_time = greatest(virtual_time, $2::bigint), pass = pass + $3
WHERE queue_rank = $1
"""

# Taking over the renewal of a valid lease another process (or nobody) renews: the
# session's client now talks to this process. Fenced and only while still valid.
TAKE_OVER_LEASE: Final = """
UPDATE download_slot
SET holder_node = $3, lease_expires_at = now() + make_interval(secs => $4)
WHERE session_key = $1 AND lease_token = $2 AND lease_expires_at > now()
RETURNING extract(epoch FROM lease_expires_at - now())::float8 AS lease_left
"""

# A holder may renew a lease that ran out while the database was slow, as long as its
# token is still the slot's: nobody else has been granted the slot meanwhile.
RENEW_LEASES: Final = """
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
"""

RELEASE_SLOT: Final = """
UPDATE download_slot
SET session_key = NULL, holder_node = NULL, lease_expires_at = NULL, claimed_at = NULL
WHERE slot_no = $1 AND lease_token = $2 AND session_key = $3
RETURNING slot_no
"""

# ----------------------------------------------------------------------------- sessions

SESSION_WITH_LEASE: Final = """
SELECT d.state, d.marked, d.mark_backup, d.base_class, d.queue_rank, d.arrival,
       d.arrival_wall_ms, d.object_size, d.principal, d.yield_requested,
       s.slot_no, s.lease_token,
       extract(epoch FROM s.lease_expires_at - now())::float8 AS lease_left
FROM download_session AS d
LEFT JOIN download_slot AS s ON s.session_key = d.session_key
WHERE d.session_key = $1
"""

OTHERS_WAITING: Final = """
SELECT EXISTS (SELECT 1 FROM download_session WHERE state = 0 AND session_key <> $1)
"""

# The round-robin turn of a principal's next waiter in a class: k rounds after the
# current one for its k-th waiter; an old arrival (ticket, pause) re-enters the
# current round and is ordered by its arrival within it.
NEXT_TAG: Final = """
INSERT INTO principal_round AS p (queue_rank, principal, last_tag)
VALUES ($1, $2, (SELECT virtual_time FROM class_state WHERE queue_rank = $1) + 1)
ON CONFLICT (queue_rank, principal) DO UPDATE
SET last_tag = CASE WHEN $3
    THEN greatest(p.last_tag, (SELECT virtual_time FROM class_state WHERE queue_rank = $1) + 1)
    ELSE greatest(p.last_tag, (SELECT virtual_time FROM class_state WHERE queue_rank = $1)) + 1
END
RETURNING CASE WHEN $3
    THEN (SELECT virtual_time FROM class_state WHERE queue_rank = $1) + 1
    ELSE last_tag END
"""

# The row a newcomer gets (``admit_session`` inserts it; benchmarks fill queues with it).
INSERT_SESSION: Final = """
INSERT INTO download_session (
    session_key, principal, base_class, queue_rank, has_id, object_size, state,
    arrival, arrival_wall_ms, order_key, aging_since, promote_at, waiting_since,
    check_at, no_show_at, last_activity)
VALUES ($1, $2, $3, $3, $4, $5, 0, $6, $7, $8, $9, $10, $9, $11, $12, $9)
ON CONFLICT (session_key) DO NOTHING
RETURNING seq
"""

RESUME_PAUSED: Final = """
UPDATE download_session
SET state = 0, queue_rank = base_class, order_key = $2, aging_since = $3, promote_at = $4,
    waiting_since = $3, check_at = $5, no_show_at = $6, marked = false, mark_backup = false,
    paused_until = NULL, first_estimate = NULL, first_estimate_at = NULL
WHERE session_key = $1 AND state = 2
"""

# Everything a queued answer needs, in one round trip: the waiters ahead in the
# session's own class (an index range), and the class lengths for the stride estimate.
POSITION: Final = """
SELECT d.queue_rank, d.marked,
       (SELECT count(*) FROM download_session AS w
        WHERE w.state = 0 AND w.queue_rank = d.queue_rank
          AND (w.order_key, w.arrival, w.seq) < (d.order_key, d.arrival, d.seq)) AS own_ahead,
       d.first_estimate
FROM download_session AS d
WHERE d.session_key = $1 AND d.state = 0
"""

# What gateways need for estimates: one row the leader refreshes every tick, plus the
# slot table (at most ``sessions`` rows). Never a scan of the waiting sessions.
QUEUE_SNAPSHOT: Final = """
SELECT q.last_release, q.free_at_mark, q.finish_table, q.finish_table_at, q.fleet_rate,
       q.class_lengths, q.waiting_bytes, q.session_count,
       (SELECT array_agg(pass ORDER BY queue_rank) FROM class_state) AS passes,
       (SELECT count(*) FROM download_slot WHERE session_key IS NOT NULL) AS active,
       (SELECT count(*) FROM download_slot AS s JOIN download_session AS d
            ON d.session_key = s.session_key WHERE d.base_class = 0) AS active_interactive
FROM queue_state AS q
"""

QUEUE_SHAPE: Final = """
SELECT queue_rank,
       count(*) FILTER (WHERE state = 0) AS n,
       coalesce(sum(object_size) FILTER (WHERE state = 0), 0)::float8 AS bytes,
       count(*) AS sessions
FROM download_session GROUP BY queue_rank
"""

# A class that had nobody waiting must not bank credit for the idle time (as in
# memory): its pass catches up with the pass the last grant had (``global pass``).
# Moving ``caught_up_to`` with it keeps the grant trigger (migration 0005) out of it.
# The pass the last grant had (the in-memory fair queue's ``global pass``).
LAST_GRANT_PASS: Final = (
    "coalesce((SELECT pass_at_grant FROM class_state ORDER BY granted_seq DESC LIMIT 1), 0)"
)

CATCH_UP_IDLE_CLASSES: Final = f"""
UPDATE class_state AS c SET pass = g.pass, caught_up_to = g.pass
FROM (SELECT {LAST_GRANT_PASS} AS pass) AS g
WHERE c.queue_rank = ANY($1::smallint[]) AND c.pass < g.pass
"""

GLOBAL_PASS: Final = f"SELECT {LAST_GRANT_PASS}"

STORE_SHAPE: Final = """
UPDATE queue_state SET class_lengths = $1, waiting_bytes = $2, session_count = $3
"""

RECORD_CHECK: Final = """
UPDATE download_session
SET check_at = $2, no_show_at = $3, first_estimate = coalesce(first_estimate, $4),
    first_estimate_at = CASE WHEN first_estimate IS NULL THEN $5 ELSE first_estimate_at END
WHERE session_key = $1 AND state = 0
"""

# Delivery of one range, fenced: nothing changes unless the lease named by the grant is
# still the session's. The start of the download is decided as in memory (R-SESS-8).
# When that makes the session complete and no other range of it is in flight, the same
# statement releases the slot (fenced), deletes the session and counts the completion
# (migration 0003, ADR 0011). Answers 'fenced', 'recorded' or 'completed'.
RECORD_DELIVERY: Final = """
SELECT record_delivery($1, $2, $3, $4, $5, $6, $7, $8, $9)
"""

RECORD_INTERRUPTION: Final = """
UPDATE download_session AS d
SET last_activity = $3, interrupted = d.interrupted OR $4
FROM download_slot AS s
WHERE d.session_key = $1 AND s.session_key = $1 AND s.lease_token = $2
"""

NOTE_RELEASE: Final = "UPDATE queue_state SET last_release = $1"

TOUCH_SESSIONS: Final = """
UPDATE download_session SET last_activity = greatest(last_activity, $2)
WHERE session_key = ANY($1::bytea[]) AND state = 1
"""

# ----------------------------------------------------------------------------- fleet

# Returns the database's clock: the sample that keeps a node's queue time (DatabaseClock).
HEARTBEAT: Final = """
INSERT INTO fleet_node (node_id, rate) VALUES ($1, $2)
ON CONFLICT (node_id) DO UPDATE SET heartbeat_at = now(), rate = excluded.rate
RETURNING extract(epoch FROM clock_timestamp())::float8
"""

LEAVE_FLEET: Final = "DELETE FROM fleet_node WHERE node_id = $1"

# Leadership is a lease too: kept by renewing, taken over only once expired; the token
# grows with every change of leader, so a paused former leader is fenced out.
TAKE_LEADERSHIP: Final = """
UPDATE queue_leader
SET token = CASE WHEN node_id = $1 THEN token ELSE token + 1 END,
    node_id = $1, expires_at = now() + make_interval(secs => $2)
WHERE node_id = $1 OR expires_at IS NULL OR expires_at < now()
RETURNING token
"""

RESIGN_LEADERSHIP: Final = """
UPDATE queue_leader SET expires_at = now() WHERE node_id = $1
"""

# Taken inside the leader's transaction: only the current leader's work commits.
CONFIRM_LEADERSHIP: Final = """
SELECT 1 FROM queue_leader
WHERE node_id = $1 AND token = $2 AND expires_at > now()
FOR UPDATE
"""

# ----------------------------------------------------------------------------- preemption

# R-PREEMPT-2: a yielder waits behind the head it yielded to only while that head waits.
UNBLOCK_YIELDERS: Final = """
UPDATE download_session AS w SET blocked_by = NULL
WHERE w.state = 0 AND w.blocked_by IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM download_session AS h
                  WHERE h.session_key = w.blocked_by AND h.state = 0)
"""

# A yield no longer needed: its head is gone or got a slot another way.
CANCEL_STALE_YIELDS: Final = """
UPDATE download_session AS v SET yield_requested = false, blocked_by = NULL
WHERE v.state = 1 AND v.yield_requested
  AND NOT EXISTS (SELECT 1 FROM download_session AS h
                  WHERE h.session_key = v.blocked_by AND h.state = 0)
"""

PENDING_YIELD: Final = """
SELECT EXISTS (SELECT 1 FROM download_session WHERE state = 1 AND yield_requested)
"""

# Every active session: the policy's ``choose_victim`` decides who may yield.
PREEMPTION_CANDIDATES: Final = """
SELECT d.session_key, d.principal, d.base_class, d.slot_since, d.has_id, d.yield_requested
FROM download_slot AS s JOIN download_session AS d ON d.session_key = s.session_key
"""

REQUEST_YIELD: Final = """
WITH asked AS (
    UPDATE download_session SET yield_requested = true, blocked_by = $2
    WHERE session_key = $1 AND state = 1 AND NOT yield_requested
    RETURNING 1
)
UPDATE queue_state SET preemptions_total = preemptions_total + (SELECT count(*) FROM asked)
"""

# The yielder waits again with its arrival but without its aging (R-PREEMPT-2), and the
# head it yielded to is marked at once so that it takes the slot on its next poll.
REQUEUE_YIELDER: Final = """
WITH yielder AS (
    UPDATE download_session
    SET state = 0, yield_requested = false, queue_rank = base_class, order_key = $2,
        aging_since = $3, promote_at = $4, waiting_since = $3, check_at = $5, no_show_at = $6,
        marked = false, mark_backup = false, first_estimate = NULL, first_estimate_at = NULL
    WHERE session_key = $1 AND state = 1
    RETURNING blocked_by
)
UPDATE download_session AS h SET marked = true, mark_backup = false
FROM yielder WHERE h.session_key = yielder.blocked_by AND h.state = 0
"""

ACTIVE_BY_PRINCIPAL: Final = """
SELECT d.principal, count(*) FROM download_slot AS s
JOIN download_session AS d ON d.session_key = s.session_key
GROUP BY d.principal
"""

UNDER_SHARE_WAITING: Final = """
SELECT EXISTS (SELECT 1 FROM download_session
               WHERE state = 0 AND NOT (principal = ANY($1::text[])))
"""

SET_MARKS: Final = """
UPDATE download_session AS d SET marked = true, mark_backup = m.backup
FROM unnest($1::bytea[], $2::bool[]) AS m(session_key, backup)
WHERE d.session_key = m.session_key AND d.state = 0
"""

REKEY_WAITING: Final = """
UPDATE download_session AS d SET order_key = k.order_key
FROM unnest($1::bytea[], $2::float8[]) AS k(session_key, order_key)
WHERE d.session_key = k.session_key AND d.state = 0
"""

WAITING_FOR_REKEY: Final = """
SELECT session_key, principal, queue_rank, object_size, arrival
FROM download_session WHERE state = 0 ORDER BY arrival, seq
"""

COUNT_EXPIRIES: Final = """
UPDATE queue_state SET no_shows_total = no_shows_total + $1,
    idle_releases_total = idle_releases_total + $2, reaped_total = reaped_total + $3,
    last_release = CASE WHEN $2 + $3 > 0 THEN $4 ELSE last_release END
"""

# ----------------------------------------------------------------------------- stats

STATS: Final = """
SELECT d.base_class, d.state, count(*) AS n, min(d.waiting_since) AS oldest,
       sum(d.object_size)::float8 AS bytes
FROM download_session AS d
GROUP BY d.base_class, d.state
"""

COUNTERS: Final = """
SELECT completed_total, no_shows_total, idle_releases_total, reaped_total, fleet_rate,
       finish_table, preemptions_total
FROM queue_state
"""

# ------------------------------------------------------------------- range shares

# R-SESS-11 across processes (migration 0006, ADR 0018): one more range for this
# process's share of a session's lease, if the live processes' shares leave room.
TAKE_RANGE: Final = """
SELECT granted, contended FROM take_range($1, $2, $3, $4, $5)
"""

# Unused shares handed back, for several leases at once: a share that reaches nothing
# is deleted, so a row of 0 keeps meaning "refused and waiting" (contention).
GIVE_BACK_RANGES: Final = """
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
"""
