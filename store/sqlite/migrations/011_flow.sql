-- 008_flow: priorities and fair claiming across tenants. A run's priority is a head start in
-- its queue's claim order (one minute a level); runs_lanes orders each (queue, tenant) lane's
-- ready runs by that claim time, so a fair claim seeks each lane's head instead of reading the
-- backlog, and finds the next tenant with ready runs with one seek too. The expression must be
-- written exactly so in the claim's queries for the planner to use the index.
ALTER TABLE runs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
CREATE INDEX runs_lanes ON runs (queue, tenant, ready_at - priority * 60000000000, id)
	WHERE state = 'ready';
