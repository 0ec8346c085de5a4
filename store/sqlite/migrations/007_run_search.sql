-- 002_run_search: indexes for the operator's run listings over a large table. Each serves one
-- filter, newest first (id order is creation order), so a page reads a page of index entries.
-- The columns but state never change after insert, so these cost only the insert; state's index
-- is touched on each state change (not on a completed step).
CREATE INDEX runs_state_id ON runs (state, id);
CREATE INDEX runs_job_id ON runs (job, id);
CREATE INDEX runs_tenant_id ON runs (tenant, id);
CREATE INDEX runs_queue_id ON runs (queue, id);
CREATE INDEX runs_key_id ON runs (key, id);
-- The overview's throughput reads runs finished in the last minutes.
CREATE INDEX runs_finished ON runs (finished_at);
