-- 016_key_entries: a create writes seven index entries instead of eight.
-- A run's key is in two indexes: runs_live_key (the idempotency index, its live states) and
-- runs_key_id (the run search's key listing, every state but running). A live run's key was
-- therefore written twice. runs_live_key is rebuilt as (key, job): the same columns, so the same
-- uniqueness and the same ON CONFLICT (job, key) target, but now a search by key can read the
-- live runs of that key there, by its leading column. They are few however many runs a key has
-- had: at most one per job. runs_key_id then holds only the runs that are not live (blocked and
-- finished ones), and a create (ready or delayed) and a wake-up write no entry in it. The run
-- search reads a key's live runs through runs_live_key and the rest through runs_key_id, merged
-- in id order (sql_search.go). Each index is rebuilt in place; the rebuild reads the table once
-- and blocks writes to runs while it runs. The new unique index holds exactly the rows the old
-- one did, so it cannot fail on existing data.
DROP INDEX {S}.runs_live_key;
CREATE UNIQUE INDEX runs_live_key ON {S}.runs (key, job)
	WHERE state IN ('ready', 'delayed', 'running', 'suspended');
DROP INDEX {S}.runs_key_id;
CREATE INDEX runs_key_id ON {S}.runs (key, id)
	WHERE state NOT IN ('ready', 'delayed', 'running', 'suspended');
