-- 002_backfills: the backfill ledger, one row per pass (a pass is one run, so run_id is the key).
-- It is a report of what has been swept; a resumed pass restarts from its run's step
-- checkpoints, never from this row.
CREATE TABLE backfills (
    run_id       TEXT    NOT NULL PRIMARY KEY,
    name         TEXT    NOT NULL,
    checksum     TEXT    NOT NULL DEFAULT '',
    status       TEXT    NOT NULL,
    app_version  TEXT    NOT NULL DEFAULT '',
    rows_done    INTEGER NOT NULL DEFAULT 0,
    batches      INTEGER NOT NULL DEFAULT 0,
    cursor       TEXT    NOT NULL DEFAULT '',
    total        INTEGER NOT NULL DEFAULT -1,
    error        TEXT    NOT NULL DEFAULT '',
    started_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    completed_at INTEGER NOT NULL
);

-- The gate's question ("is there a completed pass of this name?") and --list --name.
CREATE INDEX backfills_name ON backfills (name, started_at);
