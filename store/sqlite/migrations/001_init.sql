-- 001_init: the first schema of the SQLite backend.
--
-- Times are INTEGER unix nanoseconds in UTC; the zero time.Time is stored as the smallest int64
-- (-9223372036854775808), so every time column is NOT NULL and compares and sorts like the Go
-- value it holds (zero first). Payloads are BLOBs the store never looks inside.

-- runs: one row per run, its current state (derived from its history and kept beside it).
CREATE TABLE runs (
    id          TEXT    NOT NULL PRIMARY KEY,
    job         TEXT    NOT NULL,
    queue       TEXT    NOT NULL,
    key         TEXT    NOT NULL,
    tenant      TEXT    NOT NULL DEFAULT '',
    no_tenant   INTEGER NOT NULL DEFAULT 0,
    enqueued_by TEXT    NOT NULL DEFAULT '',
    input       BLOB,
    state       TEXT    NOT NULL,
    attempt     INTEGER NOT NULL,
    fence       INTEGER NOT NULL DEFAULT 0,
    worker_id   TEXT    NOT NULL DEFAULT '',
    lease_until INTEGER NOT NULL,
    ready_at    INTEGER NOT NULL,
    last_seq    INTEGER NOT NULL,
    result      BLOB,
    error_code  TEXT    NOT NULL DEFAULT '',
    error       TEXT    NOT NULL DEFAULT '',
    stop_reason TEXT    NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    finished_at INTEGER NOT NULL
);

-- A live run holds its (job, key): the idempotency rule, enforced by the database as well as
-- checked by the store, so no code path can ever create a second live run for a key.
CREATE UNIQUE INDEX runs_live_key ON runs (job, key)
    WHERE state IN ('ready', 'delayed', 'running', 'suspended');

-- Claims walk one queue's ready runs in (ReadyAt, id) order; QueueStats groups by (queue, state)
-- and reads min(ready_at) from the same index without touching the table.
CREATE INDEX runs_queue_state ON runs (queue, state, ready_at, id);

-- Lease expiry looks only at running runs, in (lease_until, id) order.
CREATE INDEX runs_lease ON runs (lease_until, id) WHERE state = 'running';

-- history: the append-only log of each run, seq contiguous from 1.
CREATE TABLE history (
    run_id TEXT    NOT NULL REFERENCES runs (id),
    seq    INTEGER NOT NULL,
    kind   TEXT    NOT NULL,
    name   TEXT    NOT NULL DEFAULT '',
    at     INTEGER NOT NULL,
    data   BLOB,
    PRIMARY KEY (run_id, seq)
);

-- timers: durable timers; fire_* is the event appended when the timer fires (NULL: none). They
-- fire in (due_at, run_id, key) order, read from timers_due.
CREATE TABLE timers (
    run_id    TEXT    NOT NULL REFERENCES runs (id),
    key       TEXT    NOT NULL,
    due_at    INTEGER NOT NULL,
    fire_kind TEXT,
    fire_name TEXT,
    fire_at   INTEGER,
    fire_data BLOB,
    PRIMARY KEY (run_id, key)
);
CREATE INDEX timers_due ON timers (due_at, run_id, key);

-- waits: a suspended run's wait for a published event. match is the JSON array of the wait's
-- canonical "field=value" pairs (sorted); match_head is its first pair, or '' for an empty
-- match, so a publish selects candidates by (event, match_head IN the event's pairs) through
-- the index and checks the rest of the match in Go.
CREATE TABLE waits (
    run_id        TEXT    NOT NULL REFERENCES runs (id),
    name          TEXT    NOT NULL,
    event         TEXT    NOT NULL,
    match         TEXT    NOT NULL,
    match_head    TEXT    NOT NULL,
    lookback_from INTEGER NOT NULL,
    PRIMARY KEY (run_id, name)
);
CREATE INDEX waits_event ON waits (event, match_head);

-- events: published events, kept for the lookback window. fields is the JSON array of the
-- payload's canonical pairs (sorted).
CREATE TABLE events (
    id           TEXT    NOT NULL PRIMARY KEY,
    name         TEXT    NOT NULL,
    payload      BLOB,
    fields       TEXT    NOT NULL,
    published_at INTEGER NOT NULL
);
CREATE INDEX events_name ON events (name, published_at);
CREATE INDEX events_published ON events (published_at);

-- deliveries: which run received which event, so neither a publish nor a lookback delivers an
-- event twice to one run.
CREATE TABLE deliveries (
    event_id TEXT NOT NULL,
    run_id   TEXT NOT NULL,
    PRIMARY KEY (event_id, run_id)
) WITHOUT ROWID;

-- slots: fleet concurrency slots; a slot whose until has passed no longer counts.
CREATE TABLE slots (
    key    TEXT    NOT NULL,
    holder TEXT    NOT NULL,
    until  INTEGER NOT NULL,
    PRIMARY KEY (key, holder)
) WITHOUT ROWID;
