-- 008_trace: the W3C trace context an enqueue was made under, so the worker opens the run's
-- attempt spans as children of the enqueuer's span. Set at insert, never changed.
ALTER TABLE runs ADD COLUMN trace_parent TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN trace_state  TEXT NOT NULL DEFAULT '';
