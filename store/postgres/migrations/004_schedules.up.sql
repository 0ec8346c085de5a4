-- 002_schedules: the cron scheduler's leader lease and each schedule's durable watermark.

-- leaders: one lease row per role (the scheduler's is "scheduler"); the holder leads while until
-- is after now. A row with an expiry rather than pg_try_advisory_lock: an advisory lock belongs
-- to a session, and a pooled connection going back to the pool would take it along.
CREATE TABLE {S}.leaders (
	role   text PRIMARY KEY,
	holder text NOT NULL,
	until  timestamptz NOT NULL
);

-- schedules: every occurrence at or before watermark is dealt with (fired or dropped by the
-- catch-up policy); missed counts the dropped ones.
CREATE TABLE {S}.schedules (
	name        text PRIMARY KEY,
	watermark   timestamptz NOT NULL,
	last_fire   timestamptz,
	last_run_id text NOT NULL DEFAULT '',
	missed      bigint NOT NULL DEFAULT 0,
	paused      boolean NOT NULL DEFAULT false,
	updated_at  timestamptz NOT NULL
);
