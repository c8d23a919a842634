-- A new strategy (or aging period) orders the waiters anew, by arrival: O(n), run only
-- when `configure` changes one of them.

-- name: waiting_for_rekey
SELECT session_key, principal, queue_rank, object_size, arrival
FROM download_session WHERE state = 0 ORDER BY arrival, seq

-- name: class_virtual_times
SELECT queue_rank, virtual_time FROM class_state

-- name: rekey_waiting
UPDATE download_session AS d SET order_key = k.order_key
FROM unnest($1::bytea[], $2::float8[]) AS k(session_key, order_key)
WHERE d.session_key = k.session_key AND d.state = 0

-- name: forget_all_rounds
-- Under `ordered` the rounds are rebuilt from the new keys (insert_round); under
-- `smallest-first` they are not used.
DELETE FROM principal_round

-- name: insert_round
INSERT INTO principal_round (queue_rank, principal, last_tag) VALUES ($1, $2, $3)
