-- Issue #28: who each entry of the leader's waiter schedule is (download_session.seq),
-- in the same order. A poll finds its own start by who it is: read by its count of
-- waiters ahead, it was told the start of one who stood a round before it whenever
-- waiters had started since the tick that made the schedule.
ALTER TABLE queue_state ADD COLUMN waiter_schedule_seqs bigint[];
