-- 015_listing_partial: the four listing indexes hold no running run. A claim (ready → running)
-- changes state, so it is never a HOT update, and it used to write an entry in each of these
-- four indexes for a version that lives only as long as the run runs; the completion that
-- follows writes them all again. Running runs are few (at most the fleet's slots, plus the
-- lapsed leases not yet expired), so the run search reads them apart, through runs_lease, and
-- merges them into the listing (sql_search.go). Ready runs keep their entries: a backlog can
-- be millions of runs, and only these indexes list them in id order. Each index is rebuilt in
-- place; the rebuild reads the table once and holds a lock that blocks writes to runs while it
-- runs.
DROP INDEX {S}.runs_state_id;
CREATE INDEX runs_state_id ON {S}.runs (state, id) WHERE state <> 'running';
DROP INDEX {S}.runs_job_id;
CREATE INDEX runs_job_id ON {S}.runs (job, id) WHERE state <> 'running';
DROP INDEX {S}.runs_queue_id;
CREATE INDEX runs_queue_id ON {S}.runs (queue, id) WHERE state <> 'running';
DROP INDEX {S}.runs_key_id;
CREATE INDEX runs_key_id ON {S}.runs (key, id) WHERE state <> 'running';
