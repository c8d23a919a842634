-- The leader's tick: reaping, idle release, expiry, aging, marks.
--
-- Only the leader runs these, inside the transaction that confirm_leadership opened.

-- name: reap_expired
-- Dead holders: a lease is freed only after it expired AND its holder stopped beating
-- for a lease period (never before the TTL; a slow renew of a live node is not death).
WITH dead AS (
    SELECT s.slot_no FROM download_slot AS s
    LEFT JOIN fleet_node AS n ON n.node_id = s.holder_node
    WHERE s.session_key IS NOT NULL AND s.lease_expires_at < now()
      AND (n.node_id IS NULL OR n.heartbeat_at < now() - make_interval(secs => $1))
    FOR UPDATE OF s SKIP LOCKED
), freed AS (
    UPDATE download_slot AS s
    SET session_key = NULL, holder_node = NULL, lease_expires_at = NULL, claimed_at = NULL
    FROM dead WHERE s.slot_no = dead.slot_no
    RETURNING 1
)
SELECT count(*) FROM freed

-- name: pause_orphans
-- Reaped/idle sessions keep their arrival and delivered ranges for ten minutes.
WITH orphans AS (
    UPDATE download_session AS d
    SET state = 2, paused_until = $1, marked = false
    WHERE d.state = 1
      AND NOT EXISTS (SELECT 1 FROM download_slot AS s WHERE s.session_key = d.session_key)
    RETURNING 1
)
SELECT count(*) FROM orphans

-- name: idle_sessions
SELECT d.session_key, s.slot_no, s.lease_token
FROM download_session AS d
JOIN download_slot AS s ON s.session_key = d.session_key
LEFT JOIN fleet_node AS n ON n.node_id = s.holder_node
WHERE d.state = 1
  AND d.last_activity < $1::float8 - CASE WHEN d.start_offset IS NULL OR d.interrupted
                                          THEN $2::float8 ELSE $3::float8 END
  AND NOT (d.session_key = ANY($4::bytea[]))
  AND (s.holder_node = $5 OR n.heartbeat_at >= now() - make_interval(secs => $6::float8))

-- fragment: count_gone
-- Sessions the leader deletes (the rows of `gone`) leave the counts the bounds are
-- checked against (R-RES-1) through the leader's own rows (`principal_expired`,
-- `queue_expired`, migration 0004): admissions never wait for a tick's locks on them.
, by_principal AS (
    INSERT INTO principal_expired AS e (principal, sessions)
    SELECT principal, count(*) FROM gone GROUP BY principal
    ON CONFLICT (principal) DO UPDATE SET sessions = e.sessions + excluded.sessions
), total AS (
    UPDATE queue_expired SET sessions = sessions + (SELECT count(*) FROM gone)
    WHERE EXISTS (SELECT 1 FROM gone)
)
SELECT count(*) FROM gone

-- name: expire_no_shows
-- Due at the deadline itself, as in memory (R-SESS-7): not one tick later. At most $2 a
-- tick, the earliest first: a crowd that left at once goes over several ticks, each
-- inside the statement timeout, rather than failing every tick (ADR 0020).
WITH gone AS (
    DELETE FROM download_session WHERE session_key IN (
        SELECT session_key FROM download_session
        WHERE state = 0 AND no_show_at <= $1 ORDER BY no_show_at LIMIT $2)
    RETURNING principal
)
{count_gone}

-- name: expire_paused
-- Due at the end of the retention itself, as in memory (R-SESS-9); at most $2 a tick.
WITH gone AS (
    DELETE FROM download_session WHERE session_key IN (
        SELECT session_key FROM download_session
        WHERE state = 2 AND paused_until <= $1 ORDER BY paused_until LIMIT $2)
    RETURNING principal
)
{count_gone}

-- name: count_expiries
UPDATE queue_state SET no_shows_total = no_shows_total + $1,
    idle_releases_total = idle_releases_total + $2, reaped_total = reaped_total + $3,
    last_release = CASE WHEN $2 + $3 > 0 THEN $4 ELSE last_release END

-- name: forget_old_rounds
-- Also forgets the counts of principals without sessions (their rows come back with
-- their next session), so those tables stay as small as the queue, and their turns
-- (the in-memory queue forgets a principal with its last session; admit_session does
-- the same for a principal whose counts are still here, migration 0007). Only
-- principals with a completed or expired session can be idle, so only those are
-- looked at, never every principal (migration 0009).
--
-- A turn at or before its class's current round is forgotten whether or not the
-- principal still waits: a next turn is one round after the later of the current round
-- and the last turn (next_round_tag), so such a row decides nothing. At most 4,096 a
-- class per run, through principal_round_tag: when a round of hundreds of thousands
-- passes at once, its rows go over several runs.
WITH candidates AS (
    SELECT principal FROM principal_completed
    UNION
    SELECT principal FROM principal_expired
), idle AS (
    DELETE FROM principal_load AS l
    USING candidates AS c
    WHERE l.principal = c.principal
      AND NOT EXISTS (SELECT 1 FROM download_session AS d WHERE d.principal = l.principal)
      AND l.sessions = principal_gone(l.principal)
    RETURNING l.principal
), forgotten AS (
    DELETE FROM principal_expired AS e USING idle WHERE e.principal = idle.principal
), forgotten_completed AS (
    DELETE FROM principal_completed AS c USING idle WHERE c.principal = idle.principal
), forgotten_turns AS (
    DELETE FROM principal_round AS p USING idle WHERE p.principal = idle.principal
)
DELETE FROM principal_round AS p
USING (
    SELECT passed.queue_rank, passed.principal
    FROM class_state AS c
    CROSS JOIN LATERAL (
        SELECT r.queue_rank, r.principal FROM principal_round AS r
        WHERE r.queue_rank = c.queue_rank AND r.last_tag <= c.virtual_time
        LIMIT 4096
    ) AS passed
) AS passed
WHERE p.queue_rank = passed.queue_rank AND p.principal = passed.principal

-- name: fold_queue_changes
-- The leader's fold of the queue's changes into the place buckets and tallies, in a
-- REPEATABLE READ transaction of its own (migration 0009, ADR 0020); $1 is the bucket
-- size, $2 the most changes one fold takes. Answers how many changes it folded.
SELECT fold_queue_changes($1, $2)

-- name: statistics_behind
-- Whether download_session holds more than twice the rows the planner was last told of
-- (by the leader's ANALYZE or autovacuum's), and more than $1: a burst the statistics
-- have not seen (issue #26, ADR 0020). The sessions are the fold's tallies: no count.
SELECT coalesce((SELECT sum(t.sessions) FROM session_tally AS t), 0)
       > greatest(2 * c.reltuples, $1)
FROM pg_class AS c
WHERE c.oid = 'download_session'::regclass

-- name: analyse_sessions
-- The leader's ANALYZE after a burst, skipped while autovacuum analyses the table.
ANALYZE (SKIP_LOCKED) download_session

-- name: aged_waiters
-- Aging (R-CLASS-2; the rule is the policy's `promote_at`): the waiters due to move
-- up, locked until the tick commits, then moved one class up (never above release)
-- by promote_aged with the next promotion time the leader computed.
-- At most $2 a tick, the earliest due first: a crowd that arrived together and ages
-- together moves up over several ticks (ADR 0017, ADR 0020).
SELECT session_key, base_class, queue_rank, aging_since, promote_at, seq
FROM download_session
WHERE state = 0 AND promote_at <= $1
ORDER BY promote_at
LIMIT $2
FOR UPDATE SKIP LOCKED

-- name: promote_aged
-- Under `ordered` a promoted waiter takes a round-robin turn of its new class, the
-- round of its arrival if that is older than the class's last round (migration 0007,
-- promote_waiters, in the order of the keys); under `smallest-first` its order key
-- does not depend on the class, so it keeps it.
SELECT promote_waiters($1::bytea[], $2::float8[], $3)

-- name: defer_aging
-- A due waiter of a class with windows does not age (R-WIN-2, ADR 0021): it stays in
-- its class and is not due again.
UPDATE download_session SET promote_at = NULL
WHERE session_key = ANY($1::bytea[]) AND state = 0

-- name: active_for_estimate
-- `covered`: what is sent of the download, responses still running included (ADR 0033).
-- Where the download starts: as its delivered ranges say, else as its first request
-- did (`start_hint`, issue #28: a resume's one long response is half the object).
-- `sent_as_of`: when the oldest count of its responses still running was written, up
-- to which `covered` is whole; NULL when none has sent bytes not yet delivered (ADR 0038).
SELECT d.base_class, d.principal, d.object_size, d.yield_requested, d.slot_since,
       coalesce(d.start_offset, d.start_hint) AS start_offset,
       least({covered_bytes} + {in_flight_bytes},
             d.object_size - coalesce(d.start_offset, d.start_hint, 0)) AS covered,
       (SELECT min(f.in_flight_at) FROM range_share AS f
        WHERE f.slot_no = s.slot_no AND f.lease_token = s.lease_token
          AND f.in_flight_bytes > 0) AS sent_as_of
FROM download_slot AS s JOIN download_session AS d ON d.session_key = s.session_key

-- name: fleet_seconds
-- The fleet's bytes per second (ADR 0027, 0028): the bytes of every live process added
-- second by second over the complete seconds [$5 - $6, $5), 0 for an idle second, in
-- order; the leader reduces them with the same function as one process's meter. The
-- other processes' seconds are as of their heartbeats; the leader passes its own as
-- they are at the tick (first $3, bytes $4). Beside them: the sum of the peaks of live
-- processes without seconds (an older version, during a rolling upgrade), added as the
-- older leader added them, and the last fleet rate stored, which stays when the window
-- holds no byte, as one process keeps its last peak. And the end of the seconds that
-- every other live process has reported (NULL with none): the fleet's seconds before it
-- are complete.
WITH live AS (
    SELECT rate, rate_first, rate_seconds FROM fleet_node
    WHERE heartbeat_at >= now() - make_interval(secs => $1) AND node_id <> $2
), seconds AS (
    SELECT l.rate_first + s.i - 1 AS second, s.nbytes
    FROM live AS l, unnest(l.rate_seconds) WITH ORDINALITY AS s(nbytes, i)
    WHERE l.rate_first IS NOT NULL
    UNION ALL
    SELECT $3::bigint + s.i - 1, s.nbytes
    FROM unnest($4::float8[]) WITH ORDINALITY AS s(nbytes, i)
), per_second AS (
    SELECT second, sum(nbytes) AS total FROM seconds
    WHERE second >= $5::bigint - $6::int AND second < $5::bigint
    GROUP BY second
)
SELECT
    (SELECT array_agg(coalesce(p.total, 0)::float8 ORDER BY w.second)
     FROM generate_series($5::bigint - $6::int, $5::bigint - 1) AS w(second)
     LEFT JOIN per_second AS p ON p.second = w.second) AS totals,
    (SELECT coalesce(sum(rate), 0) FROM live WHERE rate_seconds IS NULL)::float8 AS older,
    (SELECT fleet_rate FROM queue_state)::float8 AS stored,
    (SELECT min(rate_first + cardinality(rate_seconds)) FROM live
     WHERE rate_first IS NOT NULL)::bigint AS reported_to

-- name: store_estimates
UPDATE queue_state SET finish_table = $1, finish_table_at = $2, fleet_rate = $3,
    free_at_mark = $4, provisional_rate = $5, waiter_schedule = $6,
    waiter_schedule_seqs = $7

-- name: class_passes
SELECT array_agg(pass ORDER BY queue_rank) FROM class_state

-- name: passes_and_global
-- The passes and the pass of the last grant (global_pass) in one read.
SELECT array_agg(pass ORDER BY queue_rank) AS passes, {last_grant_pass} AS global_pass
FROM class_state

-- name: clear_marks
UPDATE download_session SET marked = false, mark_backup = false WHERE marked

-- name: heads_of_class
-- The first waiters of a class in queue order: a range of download_session_place (the
-- one index of the order, migration 0013), whatever the planner knows of the table.
SELECT session_key, principal, base_class, queue_rank
FROM download_session
WHERE state = 0 AND queue_rank = $1 AND blocked_by IS NULL
ORDER BY place
LIMIT $2

-- name: store_marks
-- The waiters this tick marked, for every process's snapshot (ADR 0029): written with
-- the tick's last writes, as the rest of queue_state.
UPDATE queue_state SET marked = $1::bytea[]

-- name: set_marks
UPDATE download_session AS d SET marked = true, mark_backup = m.backup
FROM unnest($1::bytea[], $2::bool[]) AS m(session_key, backup)
WHERE d.session_key = m.session_key AND d.state = 0

-- name: signal_slot_free
-- A slot is free and the tick marked waiters for it: wake the requests the other
-- processes hold at the door now, not at their next re-check (migration 0019's
-- channel; delivered when the tick commits, its marks with it).
SELECT pg_notify('arkvory_slot_free', current_schema())

-- fragment: covered_bytes
-- The bytes of a download its delivered ranges cover, counted from its start offset;
-- `d` is the download_session row (the estimates, the queue state, a person's page).
coalesce((SELECT sum(upper(r) - lower(r))
          FROM unnest(d.delivered * int8multirange(
              int8range(coalesce(d.start_offset, 0), d.object_size))) AS r), 0)::bigint

-- fragment: in_flight_bytes
-- What the responses still running have sent of the download holding slot `s` (issue
-- #28, ADR 0033): every process's count under the slot's lease, which each writes about
-- once a second and when such a response ends (store_in_flight). The delivered ranges
-- hold a response's bytes only once it ended; its count is gone by then.
coalesce((SELECT sum(f.in_flight_bytes) FROM range_share AS f
          WHERE f.slot_no = s.slot_no AND f.lease_token = s.lease_token), 0)::bigint

-- name: waiting_sizes_of_class
-- The bytes the first waiters of a class still need, in queue order, and who they are
-- (issue #28): a range of download_session_place, as for the heads a marking reads.
SELECT object_size - coalesce(start_offset, start_hint, 0) AS remaining, seq
FROM download_session
WHERE state = 0 AND queue_rank = $1
ORDER BY place
LIMIT $2

-- name: store_sessions_in_force
-- The count of slots in force, why, and how many it may open at its next step (ADR
-- 0038), or NULL for a fixed count: one of the tick's last writes.
UPDATE queue_state SET sessions_in_force = $1, sizing_reason = $2, sizing_rising = $3

-- name: sessions_in_force
-- What every process's claims take as `sessions` (ADR 0038); NULL: the settings'.
SELECT sessions_in_force, sizing_reason, sizing_rising FROM queue_state
