-- Issue #28, ADR 0034: while no busy seconds have been read, estimates rest on a guess
-- raised by whatever the link has carried so far (the fleet's reading of every second,
-- not only busy ones). The leader stores it beside the counted rate, so every node's
-- answers say the same.
ALTER TABLE queue_state ADD COLUMN provisional_rate double precision NOT NULL DEFAULT 0;
