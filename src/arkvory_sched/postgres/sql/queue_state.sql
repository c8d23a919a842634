-- What an operator's queue view reads beyond the statistics (R-VIS-2).
--
-- Both statements touch at most `sessions` slot rows and one index probe per class:
-- never a scan of the waiting sessions, however long the queue is.

-- name: queue_state_active
-- The sessions holding a slot: who, in which base class, since when (fleet seconds),
-- and the bytes sent from the download's start, responses still running included.
SELECT d.principal, d.base_class, d.slot_since, d.object_size, d.start_offset,
       least({covered_bytes} + {in_flight_bytes},
             d.object_size - coalesce(d.start_offset, 0)) AS covered
FROM download_slot AS s JOIN download_session AS d ON d.session_key = s.session_key

-- name: queue_state_heads
-- The principal of the first waiter in each lane, by the queue's own order (the
-- download_session_place index): one probe per lane.
SELECT c.queue_rank, h.principal
FROM generate_series(0, 3) AS c(queue_rank)
CROSS JOIN LATERAL (SELECT d.principal FROM download_session AS d
                    WHERE d.state = 0 AND d.queue_rank = c.queue_rank
                    ORDER BY d.place LIMIT 1) AS h
