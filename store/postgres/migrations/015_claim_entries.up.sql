-- 015_claim_entries: a claim (ready → running) writes three index entries instead of eight.
-- It changes state, so it is never a HOT update: the new row version gets an entry in every
-- index whose predicate it meets. The four listing indexes and runs_worker held running runs
-- only for as long as they ran; the completion that follows writes the listing entries again
-- (and clears worker_id). Running runs are few (at most the fleet's slots, plus the lapsed
-- leases not yet expired), and runs_lease (partial on 'running') already holds every one of
-- them, so the readers that need them read them there: the run search merges them into its
-- listing (sql_search.go), WorkerRelease finds a worker's running runs there (sql_workers.go).
-- A claim now writes runs_pkey, runs_live_key and runs_lease. Ready runs keep their entries: a
-- backlog can be millions of runs, and only these indexes list them in id order. Each index is
-- rebuilt in place; the rebuild reads the table once and blocks writes to runs while it runs.
DROP INDEX {S}.runs_state_id;
CREATE INDEX runs_state_id ON {S}.runs (state, id) WHERE state <> 'running';
DROP INDEX {S}.runs_job_id;
CREATE INDEX runs_job_id ON {S}.runs (job, id) WHERE state <> 'running';
DROP INDEX {S}.runs_queue_id;
CREATE INDEX runs_queue_id ON {S}.runs (queue, id) WHERE state <> 'running';
DROP INDEX {S}.runs_key_id;
CREATE INDEX runs_key_id ON {S}.runs (key, id) WHERE state <> 'running';
DROP INDEX {S}.runs_worker;
CREATE INDEX runs_worker ON {S}.runs (worker_id) WHERE worker_id <> '' AND state <> 'running';
