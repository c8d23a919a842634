-- Issue #30 (ADR 0038): the slots the self-sizing count may open at its next step
-- while it climbs (`policy.rising_slots`), published by the leader with the count:
-- every process asks the waiters who could take them back soon. 0: not climbing, or
-- a fixed count.
ALTER TABLE queue_state ADD COLUMN sizing_rising integer NOT NULL DEFAULT 0;
