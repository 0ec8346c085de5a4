-- 008_flow: priorities and fair claiming across tenants. A run's priority is a head start in its
-- queue's claim order, one minute a level: claim_at is that order's time. It is declared
-- IMMUTABLE so it can be indexed, which is true: an interval of minutes is the same length in
-- every time zone. runs_lanes orders each (queue, tenant) lane's ready runs by claim_at, so a
-- fair claim finds each next tenant with ready runs with one index probe and reads only each
-- lane's head, never the backlog.
ALTER TABLE {S}.runs ADD COLUMN priority integer NOT NULL DEFAULT 0;
CREATE FUNCTION {S}.claim_at(ready_at timestamptz, priority integer) RETURNS timestamptz
	LANGUAGE sql IMMUTABLE PARALLEL SAFE
	AS $$ SELECT ready_at - priority * interval '1 minute' $$;
CREATE INDEX runs_lanes ON {S}.runs (queue, tenant, {S}.claim_at(ready_at, priority), id)
	WHERE state = 'ready';
