"""The SQL of the leader's tick: reaping, idle release, expiry, aging, marks.

Split from ``_sql.py`` (the statements of admissions, deliveries and the fleet) by
who runs them; the conventions there hold here too: ``$``-parameters only, unqualified
table names, lease times from the database clock, queue times passed in.
"""

from __future__ import annotations

from typing import Final

from ._sql import LAST_GRANT_PASS

# Dead holders: a lease is freed only after it expired AND its holder stopped beating
# for a lease period (never before the TTL; a slow renew of a live node is not death).
REAP_EXPIRED: Final = """
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
"""

# Reaped/idle sessions keep their arrival and delivered ranges for ten minutes.
PAUSE_ORPHANS: Final = """
WITH orphans AS (
    UPDATE download_session AS d
    SET state = 2, paused_until = $1, marked = false
    WHERE d.state = 1
      AND NOT EXISTS (SELECT 1 FROM download_slot AS s WHERE s.session_key = d.session_key)
    RETURNING 1
)
SELECT count(*) FROM orphans
"""

IDLE_SESSIONS: Final = """
SELECT d.session_key, s.slot_no, s.lease_token
FROM download_session AS d
JOIN download_slot AS s ON s.session_key = d.session_key
LEFT JOIN fleet_node AS n ON n.node_id = s.holder_node
WHERE d.state = 1
  AND d.last_activity < $1::float8 - CASE WHEN d.start_offset IS NULL OR d.interrupted
                                          THEN $2::float8 ELSE $3::float8 END
  AND NOT (d.session_key = ANY($4::bytea[]))
  AND (s.holder_node = $5 OR n.heartbeat_at >= now() - make_interval(secs => $6::float8))
"""

# Sessions the leader deletes leave the counts the bounds are checked against (R-RES-1)
# through the leader's own rows (``principal_expired``, ``queue_expired``, migration
# 0004): admissions never wait for a tick's locks on them.
_COUNT_GONE: Final = """
, by_principal AS (
    INSERT INTO principal_expired AS e (principal, sessions)
    SELECT principal, count(*) FROM gone GROUP BY principal
    ON CONFLICT (principal) DO UPDATE SET sessions = e.sessions + excluded.sessions
), total AS (
    UPDATE queue_expired SET sessions = sessions + (SELECT count(*) FROM gone)
    WHERE EXISTS (SELECT 1 FROM gone)
)
SELECT count(*) FROM gone
"""

EXPIRE_NO_SHOWS: Final = (
    """
WITH gone AS (
    DELETE FROM download_session WHERE state = 0 AND no_show_at < $1 RETURNING principal
)"""
    + _COUNT_GONE
)

EXPIRE_PAUSED: Final = (
    """
WITH gone AS (
    DELETE FROM download_session WHERE state = 2 AND paused_until < $1 RETURNING principal
)"""
    + _COUNT_GONE
)

# Also forgets the counts of principals without sessions (their rows come back with
# their next session), so those tables stay as small as the queue.
FORGET_OLD_ROUNDS: Final = """
WITH idle AS (
    DELETE FROM principal_load AS l
    WHERE l.sessions = principal_gone(l.principal)
      AND NOT EXISTS (SELECT 1 FROM download_session AS d WHERE d.principal = l.principal)
    RETURNING l.principal
), forgotten AS (
    DELETE FROM principal_expired AS e USING idle WHERE e.principal = idle.principal
), forgotten_completed AS (
    DELETE FROM principal_completed AS c USING idle WHERE c.principal = idle.principal
)
DELETE FROM principal_round AS p
USING class_state AS c
WHERE c.queue_rank = p.queue_rank AND p.last_tag <= c.virtual_time
  AND NOT EXISTS (SELECT 1 FROM download_session AS d
                  WHERE d.state = 0 AND d.queue_rank = p.queue_rank
                    AND d.principal = p.principal)
"""

# Aging (R-CLASS-2): one class up, never above release; the waiter joins the next
# round of its new class.
# Aging (the rule is the policy's ``promote_at``): the waiters due to move up, locked
# until the tick commits, then moved one class up with the next promotion time the
# leader computed. Under ``ordered`` a promoted waiter takes the next round-robin turn
# of its new class; under ``smallest-first`` its order key does not depend on the
# class, so it keeps it.
AGED_WAITERS: Final = """
SELECT session_key, base_class, queue_rank, aging_since FROM download_session
WHERE state = 0 AND promote_at <= $1
FOR UPDATE SKIP LOCKED
"""

PROMOTE_AGED: Final = """
UPDATE download_session AS d
SET queue_rank = d.queue_rank - 1,
    order_key = CASE WHEN $3 THEN
        (SELECT virtual_time + 1 FROM class_state WHERE queue_rank = d.queue_rank - 1)
        ELSE d.order_key END,
    promote_at = k.promote_at
FROM unnest($1::bytea[], $2::float8[]) AS k(session_key, promote_at)
WHERE d.session_key = k.session_key AND d.state = 0
"""

ACTIVE_FOR_ESTIMATE: Final = """
SELECT d.base_class, d.principal, d.object_size, d.start_offset, d.yield_requested,
       coalesce((SELECT sum(upper(r) - lower(r))
                 FROM unnest(d.delivered * int8multirange(
                     int8range(coalesce(d.start_offset, 0), d.object_size))) AS r), 0)::bigint
           AS covered
FROM download_slot AS s JOIN download_session AS d ON d.session_key = s.session_key
"""

FLEET_RATE: Final = """
SELECT coalesce(sum(rate), 0)::float8 FROM fleet_node
WHERE heartbeat_at >= now() - make_interval(secs => $1)
"""

STORE_ESTIMATES: Final = """
UPDATE queue_state SET finish_table = $1, finish_table_at = $2, fleet_rate = $3,
    free_at_mark = $4
"""

CLASS_PASSES: Final = "SELECT array_agg(pass ORDER BY queue_rank) FROM class_state"

# The passes and the pass of the last grant (``GLOBAL_PASS``) in one read.
PASSES_AND_GLOBAL: Final = f"""
SELECT array_agg(pass ORDER BY queue_rank) AS passes, {LAST_GRANT_PASS} AS global_pass
FROM class_state
"""

CLEAR_MARKS: Final = "UPDATE download_session SET marked = false, mark_backup = false WHERE marked"

HEADS_OF_CLASS: Final = """
SELECT session_key, principal, base_class, queue_rank
FROM download_session
WHERE state = 0 AND queue_rank = $1 AND blocked_by IS NULL
ORDER BY order_key, arrival, seq
LIMIT $2
"""
