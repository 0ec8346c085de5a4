-- 002_dedupe: which request created which run, kept for the dedupe retention window. The
-- idempotency key only holds while a run is live; a dedupe id holds past the run's end, so a
-- resent request (an outbox relay that crashed between publish and mark) never starts a second
-- run. created_at is the engine's clock, for pruning.
CREATE TABLE dedupe (
    id         TEXT    NOT NULL PRIMARY KEY,
    run_id     TEXT    NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX dedupe_created ON dedupe (created_at);
