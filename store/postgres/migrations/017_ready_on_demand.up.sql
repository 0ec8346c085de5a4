-- 017_ready_on_demand: a create writes six index entries instead of seven.
-- runs_ready (queue, ready_at, id), partial on ready runs, is read by one statement only: the
-- oldest-first claim, an engine option that is off by default. Every created, woken or retried
-- run still paid its entry, about a tenth of a bulk enqueue's time. It is now built when an
-- engine that claims oldest-first starts (Store.PrepareOldestFirst, CREATE INDEX CONCURRENTLY),
-- so a database whose engines all claim in the fair order (runs_lanes) does without it. A
-- database that has such an engine gets the index back at that engine's next start; until then
-- its claims are right, and sort the queue's ready runs.
DROP INDEX IF EXISTS {S}.runs_ready;
