-- 013_backfill_tenant: a per-tenant backfill keeps its ledger per (name, tenant): one tenant's
-- completed pass must not make another tenant's pass a no-op. A pass's tenant is its run's, so the
-- rows written before this migration take it from their run while the run is still there; a row
-- whose run retention already deleted keeps '' (a per-tenant gate does not match it, so at worst
-- that tenant is swept once more, and handlers are idempotent).
ALTER TABLE backfills ADD COLUMN tenant TEXT NOT NULL DEFAULT '';

UPDATE backfills SET tenant = (SELECT r.tenant FROM runs r WHERE r.id = backfills.run_id)
    WHERE EXISTS (SELECT 1 FROM runs r WHERE r.id = backfills.run_id AND r.tenant <> '');

-- The gate's question, per tenant: the newest completed pass of (name, tenant).
CREATE INDEX backfills_name_tenant ON backfills (name, tenant, started_at);
