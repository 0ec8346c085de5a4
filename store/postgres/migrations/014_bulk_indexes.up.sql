-- 014_bulk_indexes: runs_tenant_id holds only the runs that have a tenant. The tenant listing
-- is only ever asked for a tenant by name (the run search adds no tenant filter for the empty
-- one, and says tenant <> '' beside the equality so that a generic plan can prove this index's
-- predicate too), so the entries of untenanted runs were never read, and each cost every insert
-- (a bulk enqueue of untenanted jobs most of all) a write and its WAL.
DROP INDEX {S}.runs_tenant_id;
CREATE INDEX runs_tenant_id ON {S}.runs (tenant, id) WHERE tenant <> '';
