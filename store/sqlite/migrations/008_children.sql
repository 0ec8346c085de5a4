-- 008_children: which run started which as its child (jobs.Job.StartChild). One parent per
-- child; a parent's children are read by parent_id (cancel, inspect). created_at is the engine's
-- clock.
CREATE TABLE children (
    child_id   TEXT    NOT NULL PRIMARY KEY,
    parent_id  TEXT    NOT NULL,
    name       TEXT    NOT NULL,
    detached   INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL
);
CREATE INDEX children_parent ON children (parent_id, created_at, child_id);
