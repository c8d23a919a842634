-- The queue as a whole: the snapshot gateways estimate from, the shape and the passes
-- of the fair queue, and the fleet-wide statistics.

-- name: queue_snapshot
-- What gateways need for estimates: one row the leader refreshes every tick, plus the
-- slot table (at most `sessions` rows), with the waiters the tick marked (ADR 0029).
-- Never a scan of the waiting sessions: each held slot's class is one probe of the
-- session's key (a join let a planner without statistics hash the whole table, issue
-- #26), and the CTE is read twice but computed once.
WITH held AS MATERIALIZED (
    SELECT (SELECT d.base_class FROM download_session AS d
            WHERE d.session_key = s.session_key) AS base_class
    FROM download_slot AS s
    WHERE s.session_key IS NOT NULL
)
SELECT q.last_release, q.free_at_mark, q.finish_table, q.finish_table_at, q.fleet_rate,
       q.provisional_rate, q.waiter_schedule, q.waiter_schedule_seqs,
       q.class_lengths, q.waiting_bytes, q.session_count,
       (SELECT array_agg(pass ORDER BY queue_rank) FROM class_state) AS passes,
       (SELECT count(*) FROM download_slot WHERE session_key IS NOT NULL) AS active,
       (SELECT count(*) FROM held WHERE held.base_class = 0) AS active_interactive,
       -- Held slots by base class, for the share of a class outside its windows.
       ARRAY(SELECT count(held.base_class) FROM generate_series(0, 3) AS c(rank)
             LEFT JOIN held ON held.base_class = c.rank
             GROUP BY c.rank ORDER BY c.rank) AS active_by_class,
       q.marked
FROM queue_state AS q

-- name: queue_shape
-- Waiting sessions and their bytes per class, and all sessions (the queue's bound),
-- exact at this statement: the buckets and tallies as of the leader's last fold
-- (migration 0009) plus the changes since, which are as few as one tick's churn.
SELECT array_agg((coalesce(b.waiting, 0) + coalesce(q.waiting, 0))::bigint
                 ORDER BY c.queue_rank) AS lengths,
       (coalesce(sum(b.bytes), 0) + coalesce(sum(q.bytes), 0))::float8 AS waiting_bytes,
       ((SELECT coalesce(sum(t.sessions), 0) FROM session_tally AS t)
           + (SELECT coalesce(sum(m.delta), 0) FROM queue_change AS m))::bigint AS sessions
FROM class_state AS c
LEFT JOIN (SELECT queue_rank, sum(waiting) AS waiting, sum(bytes) AS bytes
           FROM place_bucket GROUP BY queue_rank) AS b ON b.queue_rank = c.queue_rank
LEFT JOIN (SELECT queue_rank, sum(delta) AS waiting, sum(delta * object_size)::float8 AS bytes
           FROM queue_change WHERE state = 0 GROUP BY queue_rank) AS q
    ON q.queue_rank = c.queue_rank

-- name: store_shape
UPDATE queue_state SET class_lengths = $1, waiting_bytes = $2, session_count = $3

-- fragment: last_grant_pass
-- The pass the last grant had (the in-memory fair queue's `global pass`).
coalesce((SELECT pass_at_grant FROM class_state ORDER BY granted_seq DESC LIMIT 1), 0)

-- name: catch_up_idle_classes
-- A class that had nobody waiting must not bank credit for the idle time (as in
-- memory): its pass catches up with the pass the last grant had (`global pass`).
-- Moving `caught_up_to` with it keeps the grant trigger (migration 0005) out of it.
UPDATE class_state AS c SET pass = g.pass, caught_up_to = g.pass
FROM (SELECT {last_grant_pass} AS pass) AS g
WHERE c.queue_rank = ANY($1::smallint[]) AND c.pass < g.pass

-- name: global_pass
SELECT {last_grant_pass}

-- name: stats
-- Sessions per base class and state from the tallies of the leader's last fold plus
-- the changes since (migration 0009), and each class's oldest waiter by an index probe:
-- no scan of the queue however long it is.
SELECT t.base_class, t.state, t.sessions + coalesce(q.n, 0) AS n,
       (t.bytes + coalesce(q.bytes, 0))::float8 AS bytes,
       CASE WHEN t.state = 0 THEN (SELECT min(d.waiting_since) FROM download_session AS d
                                   WHERE d.state = 0 AND d.base_class = t.base_class)
       END AS oldest
FROM session_tally AS t
LEFT JOIN (SELECT base_class, state, sum(delta) AS n,
                  sum(delta * object_size)::float8 AS bytes
           FROM queue_change GROUP BY base_class, state) AS q
    ON q.base_class = t.base_class AND q.state = t.state

-- name: counters
-- With the idle slots as the leader's last tick stored them (migration 0015).
SELECT completed_total, no_shows_total, idle_releases_total, reaped_total, fleet_rate,
       finish_table, preemptions_total,
       idle_sampled_at, idle_slots, idle_slot_seconds, idle_stretch_since,
       idle_last_stretch, idle_longest_stretch
FROM queue_state
