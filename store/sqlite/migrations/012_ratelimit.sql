-- 012_ratelimit: the durable counts of keyed rate limits, a sliding log per key. A row is one
-- counted start; it counts until until_at (its start plus the limit's period), so a take counts
-- a key's rows with until_at after now, and a prune needs no period. The counts live here, not in
-- an engine's memory, so a restart grants no fresh allowance.
CREATE TABLE rate_starts (
    key      TEXT    NOT NULL,
    until_at INTEGER NOT NULL,
    holder   TEXT    NOT NULL,
    PRIMARY KEY (key, until_at, holder)
);
CREATE INDEX rate_starts_until ON rate_starts (until_at);
