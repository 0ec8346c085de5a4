-- 012_ratelimit: the durable counts of keyed rate limits, a sliding log per key. A row is one
-- counted start; it counts until until_at (its start plus the limit's period), so a take counts
-- a key's rows with until_at after now, and a prune needs no period. The counts live here, not in
-- an engine's memory, so every engine shares one allowance and a restart grants no fresh one.
CREATE TABLE {S}.rate_starts (
	key      text NOT NULL,
	until_at timestamptz NOT NULL,
	holder   text NOT NULL,
	PRIMARY KEY (key, until_at, holder)
);
CREATE INDEX rate_starts_until ON {S}.rate_starts (until_at);
