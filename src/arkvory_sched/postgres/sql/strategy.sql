-- A new strategy (or aging period) orders the waiters anew, by arrival: O(n), run only
-- when `configure` changes one of them.

-- name: waiting_for_rekey
-- Under `smallest-first` the order key is the policy's smallest_first_key, from Python:
-- the waiters in batches of $2 after the session key $1, so that the process never
-- holds more than one batch of a long queue.
SELECT session_key, object_size, arrival FROM download_session
WHERE state = 0 AND session_key > $1
ORDER BY session_key
LIMIT $2

-- name: rekey_waiting
UPDATE download_session AS d SET order_key = k.order_key
FROM unnest($1::bytea[], $2::float8[]) AS k(session_key, order_key)
WHERE d.session_key = k.session_key AND d.state = 0

-- name: forget_all_rounds
-- Under `smallest-first` the round-robin turns are not used.
DELETE FROM principal_round

-- name: rekey_round_tags
-- Under `ordered` each waiter takes its round-robin turn again, by arrival, as a
-- newcomer or a returning download would (migration 0007, rekey_round_tags).
SELECT rekey_round_tags()
