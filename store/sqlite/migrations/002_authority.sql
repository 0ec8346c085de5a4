-- 002_authority: what makes the engine the authority over its workers.

-- keys: the engine's secrets (the lease-token key), shared by every process on this file. The
-- first value stored under a name wins and never changes.
CREATE TABLE keys (
    name  TEXT NOT NULL PRIMARY KEY,
    value BLOB NOT NULL
);
