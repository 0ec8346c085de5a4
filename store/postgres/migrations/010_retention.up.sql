-- 008_retention: a sweep keeps a finished run that a dedupe id inside its window still names, and
-- deletes the dedupe ids of the runs it deletes; both look the ids up by run. (history, timers,
-- waits and deliveries already lead with run_id.)
CREATE INDEX dedupe_run ON {S}.dedupe (run_id);
