-- leaders: one lease row per role (the scheduler's is "scheduler"); the holder leads while
-- until is after now. A row, not a lock: it needs no connection affinity.
CREATE TABLE leaders (
    role   TEXT    NOT NULL PRIMARY KEY,
    holder TEXT    NOT NULL,
    until  INTEGER NOT NULL
) WITHOUT ROWID;

-- schedules: each cron schedule's durable watermark (every occurrence at or before it is dealt
-- with), its last fire, the occurrences its catch-up policy dropped, and whether it is paused.
CREATE TABLE schedules (
    name        TEXT    NOT NULL PRIMARY KEY,
    watermark   INTEGER NOT NULL,
    last_fire   INTEGER NOT NULL,
    last_run_id TEXT    NOT NULL DEFAULT '',
    missed      INTEGER NOT NULL DEFAULT 0,
    paused      INTEGER NOT NULL DEFAULT 0,
    updated_at  INTEGER NOT NULL
) WITHOUT ROWID;
