-- 008_children: which run started which as its child (jobs.Job.StartChild). One parent per
-- child; a parent's children are read by parent_id (cancel, inspect). created_at is the engine's
-- clock.
CREATE TABLE {S}.children (
	child_id   text PRIMARY KEY,
	parent_id  text NOT NULL,
	name       text NOT NULL,
	detached   boolean NOT NULL DEFAULT false,
	created_at timestamptz NOT NULL
);
CREATE INDEX children_parent ON {S}.children (parent_id, created_at, child_id);
