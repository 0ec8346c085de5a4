-- 002_authority: what makes the engine the authority over its workers.

-- keys: the engine's secrets (the lease-token key), shared by every engine process on this
-- schema. The first value stored under a name wins and never changes.
CREATE TABLE {S}.keys (
	name  text PRIMARY KEY,
	value bytea NOT NULL
);
