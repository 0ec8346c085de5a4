-- 021_incompatible_tenant_key: a live run holds its (job, tenant, key), not its (job, key). Two
-- tenants may each have a live run under the same key of a job, and a create is deduped only onto
-- a run of its own tenant; a tenant that could guess another's key could otherwise hold it with a
-- delayed run of its own and refuse that tenant's enqueues. A no-tenant run's tenant is '' (the
-- column is NOT NULL DEFAULT ''), so no-tenant runs share one value and the index needs no NULLS
-- NOT DISTINCT (Postgres 15) to keep them to one live run a key. The key stays the leading column,
-- so the run search still reads a key's live runs here (016_key_entries); the create's probe names
-- all three columns, and its ON CONFLICT target is (job, tenant, key), the same columns as a set.
-- The index is rebuilt in place; the rebuild reads the table once and blocks writes to runs while
-- it runs. Whatever was unique by (job, key) is unique by (key, job, tenant), so it cannot fail on
-- existing data.
--
-- Incompatible: an engine of an earlier version creates runs with ON CONFLICT (job, key), which
-- names no unique index once this one is rebuilt, so every one of its creates fails. Such an
-- engine refuses to open a schema that holds this migration (IncompatiblePrefix).
DROP INDEX {S}.runs_live_key;
CREATE UNIQUE INDEX runs_live_key ON {S}.runs (key, job, tenant)
	WHERE state IN ('ready', 'delayed', 'running', 'suspended');
