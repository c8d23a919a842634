-- The fleet: each process's heartbeat, and the leadership of the queue's tick.

-- name: heartbeat
-- Returns the database's clock: the sample that keeps a node's queue time (DatabaseClock).
-- The node's own peak ($2) and its complete seconds of queue time, the first ($3) and
-- their bytes ($4), from which the leader sums the fleet's rate (migration 0012).
INSERT INTO fleet_node (node_id, rate, rate_first, rate_seconds) VALUES ($1, $2, $3, $4)
ON CONFLICT (node_id) DO UPDATE SET heartbeat_at = now(), rate = excluded.rate,
    rate_first = excluded.rate_first, rate_seconds = excluded.rate_seconds
RETURNING extract(epoch FROM clock_timestamp())::float8

-- name: leave_fleet
DELETE FROM fleet_node WHERE node_id = $1

-- name: take_leadership
-- Leadership is a lease too: kept by renewing, taken over only once expired; the token
-- grows with every change of leader, so a paused former leader is fenced out.
UPDATE queue_leader
SET token = CASE WHEN node_id = $1 THEN token ELSE token + 1 END,
    node_id = $1, expires_at = now() + make_interval(secs => $2)
WHERE node_id = $1 OR expires_at IS NULL OR expires_at < now()
RETURNING token

-- name: resign_leadership
UPDATE queue_leader SET expires_at = now() WHERE node_id = $1

-- name: confirm_leadership
-- Taken inside the leader's transaction: only the current leader's work commits.
SELECT 1 FROM queue_leader
WHERE node_id = $1 AND token = $2 AND expires_at > now()
FOR UPDATE
