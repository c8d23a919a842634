-- Issue #30 (ADR 0038): slots that size themselves. Under `min_sessions` the leader
-- moves the count of slots in force between the operator's bounds and publishes it
-- here with its tick, fenced like every write of the tick; every process's claims
-- take it as `sessions`, and a new leader starts from it. NULL: the count is fixed
-- (`sessions` of the settings). The reason is what an operator reads beside it.
ALTER TABLE queue_state ADD COLUMN sessions_in_force integer,
                        ADD COLUMN sizing_reason text;
