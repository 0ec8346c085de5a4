-- 002_run_search: indexes for the operator's run listings over a large table (runs_state_id
-- already serves the state filter). Each serves one filter, newest first (id order is creation
-- order), so a page reads a page of index entries. job, tenant, queue and key never change after
-- insert, so these indexes cost only the insert and leave a completed step's update HOT.
CREATE INDEX runs_job_id ON {S}.runs (job, id);
CREATE INDEX runs_tenant_id ON {S}.runs (tenant, id);
CREATE INDEX runs_queue_id ON {S}.runs (queue, id);
CREATE INDEX runs_key_id ON {S}.runs (key, id);
-- The overview's throughput reads runs finished in the last minutes.
CREATE INDEX runs_finished ON {S}.runs (finished_at) WHERE finished_at IS NOT NULL;
