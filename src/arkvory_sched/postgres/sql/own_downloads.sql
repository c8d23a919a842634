-- A person's own downloads (issue #19, ADR 0025): one principal's sessions and places.
--
-- The principal's sessions are found through download_session_principal (principal,
-- state) and are at most queue_per_principal; only the first $3 by arrival get a
-- place, counted exactly as a poll counts it (`position`, ADR 0020): one probe of the
-- place buckets and one bounded index range each. Nothing counts the whole queue.

-- name: own_downloads
-- $1 the principal, $2 the exact head (as for `position`), $3 how many to describe.
-- `total` counts all of the principal's sessions (the same index range) so a page can
-- say how many it left out; `covered` is the bytes sent from the download's start,
-- those of responses still running included (the slot `s` of an active one, ADR 0033).
WITH mine AS (
    SELECT d.session_key, d.object_id, d.download_id, d.state, d.base_class, d.queue_rank, d.place,
           d.object_size, d.start_offset, d.delivered, d.waiting_since, d.slot_since,
           d.paused_until, d.arrival, d.seq, count(*) OVER () AS total
    FROM download_session AS d
    WHERE d.principal = $1
    ORDER BY d.arrival, d.seq
    LIMIT $3
)
SELECT d.object_id, d.download_id, d.state, d.base_class, d.queue_rank, d.object_size, d.seq,
       d.start_offset, d.waiting_since, d.slot_since, d.paused_until, d.total,
       least({covered_bytes} + {in_flight_bytes},
             d.object_size - coalesce(d.start_offset, 0)) AS covered,
       CASE WHEN d.state <> 0 THEN NULL
            WHEN coalesce(b.ahead, 0) < $2
            THEN waiting_between(d.queue_rank, '{-Infinity,-Infinity,-Infinity}', d.place)
            ELSE b.ahead + waiting_between(d.queue_rank, b.lo, d.place)
       END AS own_ahead
FROM mine AS d
LEFT JOIN LATERAL place_bucket_of(d.queue_rank, d.place) AS b ON d.state = 0
LEFT JOIN download_slot AS s ON s.session_key = d.session_key AND d.state = 1
ORDER BY d.arrival, d.seq
