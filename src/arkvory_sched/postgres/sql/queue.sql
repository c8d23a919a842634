-- The queue as a whole: the snapshot gateways estimate from, the shape and the passes
-- of the fair queue, and the fleet-wide statistics.

-- name: queue_snapshot
-- What gateways need for estimates: one row the leader refreshes every tick, plus the
-- slot table (at most `sessions` rows). Never a scan of the waiting sessions.
SELECT q.last_release, q.free_at_mark, q.finish_table, q.finish_table_at, q.fleet_rate,
       q.class_lengths, q.waiting_bytes, q.session_count,
       (SELECT array_agg(pass ORDER BY queue_rank) FROM class_state) AS passes,
       (SELECT count(*) FROM download_slot WHERE session_key IS NOT NULL) AS active,
       (SELECT count(*) FROM download_slot AS s JOIN download_session AS d
            ON d.session_key = s.session_key WHERE d.base_class = 0) AS active_interactive
FROM queue_state AS q

-- name: queue_shape
SELECT queue_rank,
       count(*) FILTER (WHERE state = 0) AS n,
       coalesce(sum(object_size) FILTER (WHERE state = 0), 0)::float8 AS bytes,
       count(*) AS sessions
FROM download_session GROUP BY queue_rank

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
SELECT d.base_class, d.state, count(*) AS n, min(d.waiting_since) AS oldest,
       sum(d.object_size)::float8 AS bytes
FROM download_session AS d
GROUP BY d.base_class, d.state

-- name: counters
SELECT completed_total, no_shows_total, idle_releases_total, reaped_total, fleet_rate,
       finish_table, preemptions_total
FROM queue_state
