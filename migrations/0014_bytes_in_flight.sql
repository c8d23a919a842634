-- Bytes in flight count (issue #28, ADR 0033).
--
-- A session's delivered ranges grow only when a response ends, so a plain GET (curl,
-- wget, a browser: one response for the whole file) stayed at 0 bytes delivered until
-- its last byte, and every waiter behind it was told the whole download was still to
-- send. Each process now writes, about once a second and in one statement for all the
-- leases it serves, what its responses still running have sent under each lease; the
-- estimates, the queue state and a person's page add it to the delivered ranges.
--
-- The count sits in the process's range_share row (migration 0006): one row per
-- process and lease, so processes serving one session never overwrite each other, and
-- a new lease or a released slot drops it with the shares (slot_range_shares). It is a
-- value, not an increment: a lost write is mended by the next. in_flight_seq orders
-- one process's writes, which leave on different connections: the tick's batch and
-- the write of a response that just ended; a write older than the row's is ignored.
ALTER TABLE range_share
    ADD COLUMN in_flight_bytes bigint NOT NULL DEFAULT 0 CHECK (in_flight_bytes >= 0),
    ADD COLUMN in_flight_seq bigint NOT NULL DEFAULT 0;
