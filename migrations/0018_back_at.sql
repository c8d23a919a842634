-- Issue #28: when a waiter's last answer brings it back. Its Retry-After is whole
-- seconds, rounded up from checkAt, so the client comes up to a second after check_at;
-- whether a marked waiter keeps a free slot for itself (policy.keeps_its_turn) is
-- judged by when it really comes. NULL until a poll is answered: a newcomer is asked
-- back in whole seconds, at check_at.
ALTER TABLE download_session ADD COLUMN back_at float8;
