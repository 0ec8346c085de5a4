-- 014_tenant_key: a live run holds its (job, tenant, key), not its (job, key). Two tenants may
-- each have a live run under the same key of a job, and an enqueue is deduped only onto a run of
-- its own tenant; a tenant that could guess another's key could otherwise hold it with a delayed
-- run of its own and refuse that tenant's enqueues. A no-tenant run's tenant is '' (the column is
-- NOT NULL), so its key is one live run too. The new index holds exactly the rows the old one
-- did, and what was unique by (job, key) is unique by (job, tenant, key), so it cannot fail on
-- existing data.
DROP INDEX runs_live_key;
CREATE UNIQUE INDEX runs_live_key ON runs (job, tenant, key)
    WHERE state IN ('ready', 'delayed', 'running', 'suspended');
