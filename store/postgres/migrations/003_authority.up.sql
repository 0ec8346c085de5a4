-- 002_authority: what makes the engine the authority over its workers.

-- keys: the engine's secrets (the lease-token key), shared by every engine process on this
-- schema. The first value stored under a name wins and never changes.
CREATE TABLE {S}.keys (
	name  text PRIMARY KEY,
	value bytea NOT NULL
);

-- The fleet's manifest. manifest_workers: each worker that sent one, with the queues it polls
-- and when it last did.
CREATE TABLE {S}.manifest_workers (
	worker_id text PRIMARY KEY,
	queues    text[] NOT NULL,
	last_seen timestamptz NOT NULL
);

-- declarations: one row per (kind, name, checksum) ever declared; data is JSON.
CREATE TABLE {S}.declarations (
	kind       text NOT NULL,
	name       text NOT NULL,
	checksum   text NOT NULL,
	data       bytea,
	first_seen timestamptz NOT NULL,
	last_seen  timestamptz NOT NULL,
	PRIMARY KEY (kind, name, checksum)
);

-- declaration_workers: which workers' current manifests hold which declarations.
CREATE TABLE {S}.declaration_workers (
	kind      text NOT NULL,
	name      text NOT NULL,
	checksum  text NOT NULL,
	worker_id text NOT NULL,
	last_seen timestamptz NOT NULL,
	PRIMARY KEY (kind, name, checksum, worker_id)
);
CREATE INDEX declaration_workers_worker ON {S}.declaration_workers (worker_id);
