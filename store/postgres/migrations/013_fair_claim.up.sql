-- 013_fair_claim: make claim_at inlinable. Its first body (ready_at - priority × 1 minute on a
-- timestamptz) uses an operator Postgres marks STABLE, so the planner never inlined it: every row
-- the fair claim read paid a SQL function call. The same arithmetic done in UTC is IMMUTABLE
-- throughout, so the planner inlines it, and it gives the same value for every input (a whole
-- number of minutes is the same length in every zone): the index's entries stay right. The index
-- is rebuilt anyway, because each open session caches the index's expression in the form it had
-- when first read, and a session holding the old form would no longer match the claim's ORDER BY
-- to the index. runs_lanes is partial (ready runs only), so the rebuild reads the table once and
-- writes only the ready runs.
CREATE OR REPLACE FUNCTION {S}.claim_at(ready_at timestamptz, priority integer) RETURNS timestamptz
	LANGUAGE sql IMMUTABLE PARALLEL SAFE
	AS $$ SELECT ((ready_at AT TIME ZONE 'UTC') - priority * interval '1 minute') AT TIME ZONE 'UTC' $$;
DROP INDEX {S}.runs_lanes;
CREATE INDEX runs_lanes ON {S}.runs (queue, tenant, {S}.claim_at(ready_at, priority), id)
	WHERE state = 'ready';
