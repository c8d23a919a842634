-- R-EST-4: a wait is scored against the estimate announced during THAT wait, with the
-- interval announced with it. The interval is computed from the moment of the estimate
-- (arkvory_sched._accuracy.announced_interval), so that moment is stored beside it.
ALTER TABLE download_session ADD COLUMN first_estimate_at double precision;
