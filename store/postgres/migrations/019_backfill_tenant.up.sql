-- 019_backfill_tenant: a per-tenant backfill keeps its ledger per (name, tenant): one tenant's
-- completed pass must not make another tenant's pass a no-op. A pass's tenant is its run's, so the
-- rows written before this migration take it from their run while the run is still there; a row
-- whose run retention already deleted keeps '' (a per-tenant gate does not match it, so at worst
-- that tenant is swept once more, and handlers are idempotent).
ALTER TABLE {S}.backfills ADD COLUMN tenant text NOT NULL DEFAULT '';

UPDATE {S}.backfills b SET tenant = r.tenant FROM {S}.runs r WHERE r.id = b.run_id AND r.tenant <> '';

-- The gate's question, per tenant: the newest completed pass of (name, tenant).
CREATE INDEX backfills_name_tenant ON {S}.backfills (name, tenant, started_at);
