-- 020_tenant_bytes: a tenant compares byte by byte, as the engine compares it. The fair claim walks
-- each queue's tenants in order from a rotation cursor the engine keeps (store.ClaimOrder,
-- LanePlace), in Go's byte order; the claim's statement compared them in the database's
-- collation. On a database whose collation is not bytewise (en_US.UTF-8, an ICU locale: most
-- installs), the two orders disagree on mixed-case tenants and the rotation settled into a cycle
-- that served some tenants twice as often as others. With the column in "C", every comparison and
-- ORDER BY on it, and the indexes that hold it (rebuilt here), are in byte order on any database.
ALTER TABLE {S}.runs ALTER COLUMN tenant TYPE text COLLATE "C";
