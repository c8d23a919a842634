-- Slots left free while someone waits (issue #28).
--
-- A slot free while a session waits is link time nobody uses. The leader counts, on
-- each tick, the free slots a waiter could take (the policy's usable_free_slots) and
-- integrates them over queue time from one tick to the next; it stores where the
-- integration stands here, with the queue's other fleet-wide figures, so that every
-- process reports the same numbers and a new leader goes on from them.
--
-- idle_sampled_at is the queue time of the last tick's count (NULL before the first),
-- idle_slots that count, idle_slot_seconds the integral up to idle_sampled_at.
-- A stretch is a span with idle_slots above 0: idle_stretch_since is when the current
-- one began (NULL outside one), idle_last_stretch the length of the last one that
-- ended, idle_longest_stretch the longest that ended.
ALTER TABLE queue_state
    ADD COLUMN idle_sampled_at double precision,
    ADD COLUMN idle_slots integer NOT NULL DEFAULT 0 CHECK (idle_slots >= 0),
    ADD COLUMN idle_slot_seconds double precision NOT NULL DEFAULT 0,
    ADD COLUMN idle_stretch_since double precision,
    ADD COLUMN idle_last_stretch double precision NOT NULL DEFAULT 0,
    ADD COLUMN idle_longest_stretch double precision NOT NULL DEFAULT 0;
