-- 008_trace: the W3C trace context an enqueue was made under, so the worker opens the run's
-- attempt spans as children of the enqueuer's span. Set at insert, never changed; a constant
-- default adds the columns without rewriting the table.
ALTER TABLE {S}.runs ADD COLUMN trace_parent text NOT NULL DEFAULT '';
ALTER TABLE {S}.runs ADD COLUMN trace_state text NOT NULL DEFAULT '';
