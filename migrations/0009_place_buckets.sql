-- Places in a long shared queue without counting everyone ahead (ADR 0020).
--
-- Until this migration a waiting client's poll counted every waiter ahead of it in its
-- class (an index range as long as its place: 200 ms at the end of a million), and the
-- leader counted the whole queue for the class lengths and the statistics.
--
-- Now each class's waiting order is cut into buckets of about `p_bucket` waiters, each
-- named by its lowest key (order_key, arrival, seq) and holding how many wait in it,
-- their bytes and how many wait in the buckets before it (`ahead`). A poll finds its
-- bucket (one index probe) and counts only the waiters of its own bucket ahead of it.
--
-- Nothing on the admission path locks a shared row for this: a row-level trigger on
-- download_session appends the change to queue_change (insert only, no index), and
-- the leader folds those rows into the buckets and the tallies once a tick, in a
-- REPEATABLE READ transaction of its own (fold_queue_changes), so every count it
-- writes is exact as of one snapshot. A place is therefore exact for the waiters in
-- the same bucket and off by at most the changes ahead since the leader's last fold.

-- One row per change of a session that matters for counts: -1 for what it was, +1 for
-- what it is now. Appended by every writer, deleted only by the leader's fold.
CREATE TABLE queue_change (
    delta       smallint NOT NULL CHECK (delta IN (-1, 1)),
    state       smallint NOT NULL,
    base_class  smallint NOT NULL,
    queue_rank  smallint NOT NULL,
    place       double precision[] NOT NULL,
    object_size bigint NOT NULL
);
-- Every row is deleted within a tick of its insert: vacuumed after 10,000 dead rows
-- rather than after a fifth of the table, so a burst does not leave the leader's
-- scans of it walking dead rows for long.
ALTER TABLE queue_change SET (autovacuum_vacuum_scale_factor = 0,
                              autovacuum_vacuum_threshold = 10000,
                              autovacuum_vacuum_insert_scale_factor = 0,
                              autovacuum_vacuum_insert_threshold = 10000);

-- Sessions and their bytes per base class and state, as of the last fold.
CREATE TABLE session_tally (
    base_class smallint NOT NULL,
    state      smallint NOT NULL,
    sessions   bigint NOT NULL DEFAULT 0,
    bytes      double precision NOT NULL DEFAULT 0,
    PRIMARY KEY (base_class, state)
);

-- A waiter's place key: its queue order (order_key, arrival, seq) as one array, which
-- compares element by element. A B-tree range on one column stops where the range
-- ends; on the row (order_key, arrival, seq) PostgreSQL 15 only stops where order_key
-- changes, so a count near the start of a round of 263,000 waiters with one order_key
-- walked the whole round. A stored column rather than an expression index, so that
-- counts are index-only scans. seq is exact as a double up to 2^53.
ALTER TABLE download_session ADD COLUMN place double precision[]
    GENERATED ALWAYS AS (ARRAY[order_key, arrival, seq::float8]) STORED;
CREATE INDEX download_session_place ON download_session (queue_rank, place) WHERE state = 0;

-- How many wait in class p_rank with a place key from p_from up to (not including)
-- p_to: one range of download_session_place, whatever the planner guesses of a range
-- whose ends it cannot see (it took a third of the table, and a churning table's index
-- for worse than a scan of a million rows).
CREATE FUNCTION waiting_between(
    p_rank smallint, p_from double precision[], p_to double precision[]
) RETURNS bigint
LANGUAGE sql STABLE
SET search_path FROM CURRENT
SET enable_seqscan = off
SET enable_bitmapscan = off
AS $$
    SELECT count(*) FROM download_session AS w
    WHERE w.state = 0 AND w.queue_rank = p_rank AND w.place >= p_from AND w.place < p_to
$$;

-- The buckets of each class's waiting order. A bucket holds the waiters whose place key
-- is at or above its own `lo` and below the next bucket's; each class has a first
-- bucket at the lowest possible key, so every waiter has exactly one bucket.
CREATE TABLE place_bucket (
    queue_rank smallint NOT NULL,
    lo         double precision[] NOT NULL,
    waiting    bigint NOT NULL DEFAULT 0,
    bytes      double precision NOT NULL DEFAULT 0,
    ahead      bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (queue_rank, lo)
);

-- The oldest waiter of a base class for the statistics: an index probe, not a scan.
CREATE INDEX download_session_oldest ON download_session (base_class, waiting_since)
    WHERE state = 0;

-- Rounds that have passed are found by their tag (forget_old_rounds), not by a scan of
-- every principal's row.
CREATE INDEX principal_round_tag ON principal_round (queue_rank, last_tag);

-- The bucket of a place key in class p_rank: the one with the greatest `lo` at or below
-- it. A set-returning SQL function, so the planner inlines it as the index probe it is.
CREATE FUNCTION place_bucket_of(p_rank smallint, p_place double precision[])
RETURNS SETOF place_bucket
LANGUAGE sql STABLE
AS $$
    SELECT * FROM place_bucket AS p
    WHERE p.queue_rank = p_rank AND p.lo <= p_place
    ORDER BY p.lo DESC
    LIMIT 1
$$;

CREATE FUNCTION note_queue_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        INSERT INTO queue_change VALUES (-1, OLD.state, OLD.base_class, OLD.queue_rank,
            OLD.place, OLD.object_size);
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO queue_change VALUES (1, NEW.state, NEW.base_class, NEW.queue_rank,
            NEW.place, NEW.object_size);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER session_enters_or_leaves
AFTER INSERT OR DELETE ON download_session
FOR EACH ROW EXECUTE FUNCTION note_queue_change();

-- A poll's own update (check_at, no_show_at, first_estimate) names none of these
-- columns, so it writes nothing here.
CREATE TRIGGER session_moves
AFTER UPDATE OF state, base_class, queue_rank, order_key, arrival, seq, object_size
ON download_session
FOR EACH ROW
WHEN (OLD.state IS DISTINCT FROM NEW.state
      OR OLD.base_class IS DISTINCT FROM NEW.base_class
      OR OLD.queue_rank IS DISTINCT FROM NEW.queue_rank
      OR OLD.order_key IS DISTINCT FROM NEW.order_key
      OR OLD.arrival IS DISTINCT FROM NEW.arrival
      OR OLD.seq IS DISTINCT FROM NEW.seq
      OR OLD.object_size IS DISTINCT FROM NEW.object_size)
EXECUTE FUNCTION note_queue_change();

-- Cut the first p_pieces × p_bucket waiters of one bucket into pieces of p_bucket,
-- counted from the rows themselves (a count that was ever wrong is right again); what
-- lies beyond stays one bucket, counted as the bucket's count less the pieces', and is
-- cut further on later folds. The scan is bounded: a bucket of a million (an existing
-- queue when this migration runs) is cut over several ticks, never in one.
CREATE FUNCTION cut_place_bucket(
    p_rank smallint, p_lo double precision[], p_bucket integer, p_pieces integer
) RETURNS void
LANGUAGE plpgsql
SET search_path FROM CURRENT
SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
    v_next double precision[];
    v_waiting bigint;
    v_bytes double precision;
BEGIN
    SELECT b.lo INTO v_next FROM place_bucket AS b
    WHERE b.queue_rank = p_rank AND b.lo > p_lo
    ORDER BY b.lo LIMIT 1;
    DELETE FROM place_bucket AS b WHERE b.queue_rank = p_rank AND b.lo = p_lo
    RETURNING b.waiting, b.bytes INTO v_waiting, v_bytes;
    WITH taken AS (
        SELECT d.place, d.object_size,
               (row_number() OVER (ORDER BY d.place) - 1) / p_bucket AS piece
        FROM (
            SELECT w.place, w.object_size
            FROM download_session AS w
            WHERE w.state = 0 AND w.queue_rank = p_rank
              AND w.place >= p_lo AND w.place < coalesce(v_next, '{Infinity,Infinity,Infinity}')
            ORDER BY w.place
            LIMIT p_bucket::bigint * p_pieces + 1
        ) AS d
    ), counted AS (
        SELECT count(*) AS n, coalesce(sum(object_size), 0)::float8 AS bytes
        FROM taken WHERE piece < p_pieces
    )
    INSERT INTO place_bucket (queue_rank, lo, waiting, bytes)
    SELECT p_rank,
           CASE WHEN piece = 0 THEN p_lo ELSE min(place) END,
           CASE WHEN piece < p_pieces THEN count(*)
                ELSE greatest(0, v_waiting - (SELECT n FROM counted)) END,
           CASE WHEN piece < p_pieces THEN sum(object_size)::float8
                ELSE greatest(0, v_bytes - (SELECT bytes FROM counted)) END
    FROM taken
    GROUP BY piece;
    IF NOT FOUND THEN  -- nobody waits there any more: the bucket stays, empty
        INSERT INTO place_bucket (queue_rank, lo) VALUES (p_rank, p_lo);
    END IF;
END
$$;

-- The leader's fold, once a tick, in a REPEATABLE READ transaction: up to p_limit of
-- the changes since the last fold into the tallies and the buckets; buckets below a
-- quarter of p_bucket merged into the bucket before them; once every change is folded,
-- up to two buckets above twice p_bucket cut (cutting counts rows, which is exact only
-- when no change is left unfolded); then `ahead` written where it changed. Returns
-- how many changes it folded.
CREATE FUNCTION fold_queue_changes(p_bucket integer, p_limit integer) RETURNS bigint
LANGUAGE plpgsql
SET search_path FROM CURRENT
-- Planned afresh on every fold: a plan cached while queue_change held a few rows ran
-- for minutes once a burst had put a million there.
SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
    v_changes bigint;
    v_small record;
    v_big record;
    v_waiting bigint;
    v_bytes double precision;
BEGIN
    WITH moved AS (
        DELETE FROM queue_change
        WHERE ctid = ANY (ARRAY(SELECT ctid FROM queue_change LIMIT p_limit))
        RETURNING *
    ), tallied AS (
        INSERT INTO session_tally AS t (base_class, state, sessions, bytes)
        SELECT m.base_class, m.state, sum(m.delta), sum(m.delta * m.object_size)::float8
        FROM moved AS m GROUP BY m.base_class, m.state
        ON CONFLICT (base_class, state) DO UPDATE
        SET sessions = t.sessions + excluded.sessions, bytes = t.bytes + excluded.bytes
    ), placed AS (
        SELECT b.queue_rank, b.lo,
               sum(m.delta) AS waiting, sum(m.delta * m.object_size)::float8 AS bytes
        FROM moved AS m
        CROSS JOIN LATERAL place_bucket_of(m.queue_rank, m.place) AS b
        WHERE m.state = 0
        GROUP BY b.queue_rank, b.lo
    ), counted AS (
        UPDATE place_bucket AS p
        SET waiting = p.waiting + placed.waiting, bytes = p.bytes + placed.bytes
        FROM placed
        WHERE p.queue_rank = placed.queue_rank AND p.lo = placed.lo
    )
    SELECT count(*) INTO v_changes FROM moved;

    FOR v_small IN
        SELECT b.queue_rank, b.lo FROM place_bucket AS b
        WHERE b.waiting < p_bucket / 4 AND b.lo[1] <> '-Infinity'
        ORDER BY b.queue_rank, b.lo DESC
    LOOP
        DELETE FROM place_bucket AS b
        WHERE b.queue_rank = v_small.queue_rank AND b.lo = v_small.lo
        RETURNING b.waiting, b.bytes INTO v_waiting, v_bytes;
        -- With the small bucket gone, its keys' bucket is the one before it.
        UPDATE place_bucket AS p SET waiting = p.waiting + v_waiting, bytes = p.bytes + v_bytes
        WHERE p.queue_rank = v_small.queue_rank
          AND p.lo = (SELECT b.lo FROM place_bucket_of(v_small.queue_rank, v_small.lo) AS b);
    END LOOP;

    IF NOT EXISTS (SELECT 1 FROM queue_change) THEN
        FOR v_big IN
            SELECT b.queue_rank, b.lo FROM place_bucket AS b
            WHERE b.waiting > 2 * p_bucket
            ORDER BY b.queue_rank, b.lo
            LIMIT 2
        LOOP
            PERFORM cut_place_bucket(v_big.queue_rank, v_big.lo, p_bucket, 64);
        END LOOP;
    END IF;

    UPDATE place_bucket AS p SET ahead = w.ahead
    FROM (
        SELECT b.queue_rank, b.lo,
               coalesce(sum(b.waiting) OVER (
                   PARTITION BY b.queue_rank ORDER BY b.lo
                   ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS ahead
        FROM place_bucket AS b
    ) AS w
    WHERE p.queue_rank = w.queue_rank AND p.lo = w.lo AND p.ahead <> w.ahead;
    RETURN v_changes;
END
$$;

-- What is there already: the tallies counted once, each class's first bucket holding
-- all its waiters (the first fold cuts them). The triggers exist before the counts are
-- taken, and creating them locks out writers until this migration commits, so no
-- change is counted twice or missed.
INSERT INTO session_tally (base_class, state, sessions, bytes)
SELECT b.base_class, s.state, 0, 0
FROM generate_series(0, 3) AS b(base_class), generate_series(0, 2) AS s(state);
UPDATE session_tally AS t SET sessions = c.n, bytes = c.bytes
FROM (SELECT base_class, state, count(*) AS n, coalesce(sum(object_size), 0)::float8 AS bytes
      FROM download_session GROUP BY base_class, state) AS c
WHERE (t.base_class, t.state) = (c.base_class, c.state);
INSERT INTO place_bucket (queue_rank, lo, waiting, bytes)
SELECT c.queue_rank, '{-Infinity,-Infinity,-Infinity}',
       (SELECT count(*) FROM download_session AS d WHERE d.state = 0 AND d.queue_rank = c.queue_rank),
       (SELECT coalesce(sum(object_size), 0)::float8 FROM download_session AS d
        WHERE d.state = 0 AND d.queue_rank = c.queue_rank)
FROM class_state AS c;
