-- 002_authority: what makes the engine the authority over its workers.

-- keys: the engine's secrets (the lease-token key), shared by every process on this file. The
-- first value stored under a name wins and never changes.
CREATE TABLE keys (
    name  TEXT NOT NULL PRIMARY KEY,
    value BLOB NOT NULL
);

-- The fleet's manifest. manifest_workers: each worker that sent one, with the queues it polls
-- (a JSON array) and when it last did.
CREATE TABLE manifest_workers (
    worker_id TEXT    NOT NULL PRIMARY KEY,
    queues    TEXT    NOT NULL,
    last_seen INTEGER NOT NULL
);

-- declarations: one row per (kind, name, checksum) ever declared; data is JSON.
CREATE TABLE declarations (
    kind       TEXT    NOT NULL,
    name       TEXT    NOT NULL,
    checksum   TEXT    NOT NULL,
    data       BLOB,
    first_seen INTEGER NOT NULL,
    last_seen  INTEGER NOT NULL,
    PRIMARY KEY (kind, name, checksum)
);

-- declaration_workers: which workers' current manifests hold which declarations.
CREATE TABLE declaration_workers (
    kind      TEXT    NOT NULL,
    name      TEXT    NOT NULL,
    checksum  TEXT    NOT NULL,
    worker_id TEXT    NOT NULL,
    last_seen INTEGER NOT NULL,
    PRIMARY KEY (kind, name, checksum, worker_id)
);
CREATE INDEX declaration_workers_worker ON declaration_workers (worker_id);
