-- 008_retention: what deleting a finished run looks up by run id. A sweep asks whether a dedupe id
-- inside its window still names the run (then the run is kept) and deletes the run's deliveries;
-- without these two indexes each of those would scan its whole table once per run.
CREATE INDEX dedupe_run ON dedupe (run_id);
CREATE INDEX deliveries_run ON deliveries (run_id);
