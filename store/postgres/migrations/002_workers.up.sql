-- 002_workers: find the runs one worker holds or keeps sticky, so a worker known to be gone
-- (a clean stop, a restart under the same id, a session that dropped) releases them at once
-- without a scan of every run. Partial: most rows hold no worker. A completed step changes no
-- worker_id, so it stays a HOT update.
CREATE INDEX runs_worker ON {S}.runs (worker_id) WHERE worker_id <> '';
