-- 001_init: the engine's tables. Every name is qualified with {S}, the configured schema (quoted),
-- so these tables can live beside an application's own. Times are timestamptz and are always
-- written from the engine's clock (never now()), so an injected clock drives this backend exactly
-- like the others.

-- runs: one row per run, its current state. fillfactor leaves room on each page so that the
-- commonest write, a completed step (last_seq and updated_at change, no indexed column does),
-- is a HOT update that touches no index.
CREATE TABLE {S}.runs (
	id          text PRIMARY KEY,
	job         text NOT NULL,
	queue       text NOT NULL,
	key         text NOT NULL,
	tenant      text NOT NULL DEFAULT '',
	no_tenant   boolean NOT NULL DEFAULT false,
	enqueued_by text NOT NULL DEFAULT '',
	input       bytea,
	state       text NOT NULL CHECK (state IN ('ready', 'delayed', 'running', 'suspended', 'blocked',
	                                           'completed', 'failed', 'cancelled')),
	attempt     integer NOT NULL DEFAULT 1,
	fence       bigint NOT NULL DEFAULT 0,
	worker_id   text NOT NULL DEFAULT '',
	lease_until timestamptz,
	ready_at    timestamptz,
	last_seq    bigint NOT NULL DEFAULT 0,
	result      bytea,
	error_code  text NOT NULL DEFAULT '',
	error       text NOT NULL DEFAULT '',
	stop_reason text NOT NULL DEFAULT '',
	created_at  timestamptz NOT NULL,
	updated_at  timestamptz NOT NULL,
	finished_at timestamptz
) WITH (fillfactor = 80);

-- Idempotency: one live run per (job, key). A create inserts ON CONFLICT DO NOTHING against this
-- index, so two concurrent creates of one key make exactly one run.
CREATE UNIQUE INDEX runs_live_key ON {S}.runs (job, key)
	WHERE state IN ('ready', 'delayed', 'running', 'suspended');

-- Claim: the oldest ready runs of a queue.
CREATE INDEX runs_ready ON {S}.runs (queue, ready_at, id) WHERE state = 'ready';

-- Lease expiry: running runs by lease end.
CREATE INDEX runs_lease ON {S}.runs (lease_until) WHERE state = 'running';

-- Listing by state, newest first (the dead-letter view lists failed runs). Listing every run
-- newest first walks the primary key backwards: ids are time-ordered.
CREATE INDEX runs_state_id ON {S}.runs (state, id);

-- history: the append-only log. seq is contiguous from 1 per run and assigned by the store under
-- the run's row lock, so the primary key never sees a conflict in correct operation. There is no
-- foreign key to runs on purpose: it would take a KEY SHARE lock on the run and an index probe on
-- every append, and every append is already made under the run's row lock.
CREATE TABLE {S}.history (
	run_id text NOT NULL,
	seq    bigint NOT NULL,
	kind   text NOT NULL,
	name   text NOT NULL DEFAULT '',
	at     timestamptz NOT NULL,
	data   bytea,
	PRIMARY KEY (run_id, seq)
);

-- timers: durable timers, unique by key per run. fire_kind is NULL when firing appends no event.
-- Timer and wait rows of a run are only written while the run's row is locked, which is what
-- lets TimerFire and RunPublish read them after locking the run and trust what they read.
CREATE TABLE {S}.timers (
	run_id    text NOT NULL,
	key       text NOT NULL,
	due_at    timestamptz NOT NULL,
	fire_kind text,
	fire_name text NOT NULL DEFAULT '',
	fire_at   timestamptz,
	fire_data bytea,
	PRIMARY KEY (run_id, key)
);
CREATE INDEX timers_due ON {S}.timers (due_at);

-- waits: a run's wait for a published event. match holds the canonical "field=value" pairs,
-- sorted; match_head is its first pair ('' for an empty match). A publish probes the index with
-- its own pairs (match_head = ANY(fields) OR match_head = ''), which narrows the candidates to
-- waits that can match, and checks the full match in Go.
CREATE TABLE {S}.waits (
	run_id        text NOT NULL,
	name          text NOT NULL,
	event         text NOT NULL,
	match         text[] NOT NULL,
	match_head    text NOT NULL,
	lookback_from timestamptz,
	PRIMARY KEY (run_id, name)
);
CREATE INDEX waits_event ON {S}.waits (event, match_head);

-- events: published events, kept for the lookback window until EventPrune. pos orders events
-- published at the same instant (publishes of one name are serialised, so pos is their order).
CREATE TABLE {S}.events (
	id           text PRIMARY KEY,
	name         text NOT NULL,
	payload      bytea,
	fields       text[] NOT NULL,
	published_at timestamptz NOT NULL,
	pos          bigint GENERATED ALWAYS AS IDENTITY
);
CREATE INDEX events_lookback ON {S}.events (name, published_at, pos);
-- The lookback check of a wait with a match: among many events of one name in the window, the
-- few whose fields contain the match (fields @> match). fastupdate is off because a search must
-- read the whole pending list, and lookbacks search as often as publishes insert.
CREATE INDEX events_fields ON {S}.events USING gin (fields) WITH (fastupdate = off);
CREATE INDEX events_published ON {S}.events (published_at);

-- deliveries: which event each run received, so a lookback never delivers one event twice to a
-- run. Pruned with the events.
CREATE TABLE {S}.deliveries (
	run_id   text NOT NULL,
	event_id text NOT NULL,
	PRIMARY KEY (run_id, event_id)
);
CREATE INDEX deliveries_event ON {S}.deliveries (event_id);

-- slots: fleet concurrency slots, one row per holder of a key.
CREATE TABLE {S}.slots (
	key    text NOT NULL,
	holder text NOT NULL,
	until  timestamptz NOT NULL,
	PRIMARY KEY (key, holder)
);
