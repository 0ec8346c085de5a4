-- 002_backfills: the backfill ledger, one row per pass (a pass is one run, so run_id is the key).
-- It is a report of what has been swept; a resumed pass restarts from its run's step
-- checkpoints, never from this row.
CREATE TABLE {S}.backfills (
	run_id       text PRIMARY KEY,
	name         text NOT NULL,
	checksum     text NOT NULL DEFAULT '',
	status       text NOT NULL CHECK (status IN ('running', 'completed', 'failed')),
	app_version  text NOT NULL DEFAULT '',
	rows_done    bigint NOT NULL DEFAULT 0,
	batches      bigint NOT NULL DEFAULT 0,
	cursor       text NOT NULL DEFAULT '',
	total        bigint NOT NULL DEFAULT -1,
	error        text NOT NULL DEFAULT '',
	started_at   timestamptz NOT NULL,
	updated_at   timestamptz NOT NULL,
	completed_at timestamptz
);

-- The gate's question ("is there a completed pass of this name?") and --list --name.
CREATE INDEX backfills_name ON {S}.backfills (name, started_at);
