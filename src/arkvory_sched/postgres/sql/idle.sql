-- Slots left free while someone waits (issue #28, migration 0015): the leader's count
-- on each tick, and where its integration over queue time stands.

-- name: idle_slot_counts
-- What the leader judges the idle slots on, in one read: the waiting sessions per base
-- class (the tallies of the last fold plus the changes since, as `stats` counts them,
-- migration 0009: no scan of the queue), the slots held per base class (at most
-- `sessions` rows), and the integration as the last tick stored it.
WITH waiting AS (
    SELECT t.base_class, t.sessions + coalesce(
               (SELECT sum(q.delta) FROM queue_change AS q
                WHERE q.base_class = t.base_class AND q.state = 0), 0) AS n
    FROM session_tally AS t
    WHERE t.state = 0
), held AS (
    SELECT d.base_class
    FROM download_slot AS s JOIN download_session AS d ON d.session_key = s.session_key
)
SELECT ARRAY(SELECT coalesce((SELECT sum(w.n) FROM waiting AS w WHERE w.base_class = r), 0)
             FROM generate_series(0, 3) AS r ORDER BY r)::bigint[] AS waiting,
       ARRAY(SELECT (SELECT count(*) FROM held AS h WHERE h.base_class = r)
             FROM generate_series(0, 3) AS r ORDER BY r)::bigint[] AS active,
       q.idle_sampled_at, q.idle_slots, q.idle_slot_seconds, q.idle_stretch_since,
       q.idle_last_stretch, q.idle_longest_stretch
FROM queue_state AS q

-- name: store_idle_slots
-- Where the integration stands after this tick's count: written with the tick's last
-- writes, as the rest of queue_state.
UPDATE queue_state SET idle_sampled_at = $1, idle_slots = $2, idle_slot_seconds = $3,
    idle_stretch_since = $4, idle_last_stretch = $5, idle_longest_stretch = $6
