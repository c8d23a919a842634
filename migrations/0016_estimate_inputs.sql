-- Issue #28: what the leader stores for estimates beyond the finish table.
--
-- Issue #28, ADR 0034: while no busy seconds have been read, estimates rest on a guess
-- raised by whatever the link has carried so far (the fleet's reading of every second,
-- not only busy ones). The leader stores it beside the counted rate, so every node's
-- answers say the same.
ALTER TABLE queue_state ADD COLUMN provisional_rate double precision NOT NULL DEFAULT 0;
-- When the first waiters start by their own sizes (issue #28): the leader's schedule
-- over the finish table, one entry per waiter in service order.
ALTER TABLE queue_state ADD COLUMN waiter_schedule double precision[];
-- Where a newcomer's first request says its download starts, until a delivered range
-- says it (start_offset, R-SESS-8): estimates read it.
ALTER TABLE download_session ADD COLUMN start_hint bigint;
