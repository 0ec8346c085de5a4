package backfill

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
)

// Kind is the manifest kind of a backfill's declaration.
const Kind = "backfill"

// Declaration is what a backfill declares about itself, as plain data: what the engine needs to
// know it exists (even if it never ran), gate it and report it. It round-trips through JSON
// unchanged, so a worker can send it to the engine.
type Declaration struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Checksum hashes the definition (see Declaration.Sum); a moved checksum warns, never refuses.
	Checksum string `json:"checksum"`
	Queue    string `json:"queue,omitempty"`
	Batch    int    `json:"batch"`
	// Rate is batches per second. It is tuning, so it is not part of the checksum.
	Rate float64 `json:"rate"`
	// Tenant is "none" (the pass sweeps every tenant) or "input" (one tenant per pass, from its
	// input).
	Tenant string `json:"tenant"`
	// Source describes the source (a keyset source's statement), when it can say.
	Source string `json:"source,omitempty"`
	// Version is the author's own revision of the definition, folded into the checksum.
	Version string `json:"version,omitempty"`
	// Requires is a migration id the pass waits on; "" for none.
	Requires string `json:"requires,omitempty"`
	// Environments lists where the backfill may run; empty means every environment.
	Environments []string `json:"environments,omitempty"`
	// HasCount reports a declared count: a dry run can say how many rows are left, and a pass
	// checks that it converged.
	HasCount bool `json:"hasCount"`
}

// Sum is the checksum of the definition: a SHA-256 over every field but Rate (pacing is tuning:
// changing it does not make a completed sweep a different sweep) and the checksum itself.
func (d Declaration) Sum() string {
	c := d
	c.Checksum, c.Rate = "", 0
	c.Environments = slices.Clone(d.Environments)
	slices.Sort(c.Environments)
	b, _ := json.Marshal(c) // plain data: cannot fail
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}

// Key is the idempotency key of a pass of the backfill for tenant: the name for a backfill
// declared AllTenants (one live pass), the name and the tenant for one declared PerTenant (one
// live pass per tenant; the tenant in the key dates from when keys were unique per job across
// tenants, and is kept so that passes enqueued before and after dedupe alike). Anything that enqueues a pass by
// hand (the CLI's --write) sends this key, so it finds the live pass an application enqueued.
func (d Declaration) Key(tenant string) string { return passKey(d.Name, d.Tenant, tenant) }

func passKey(name, mode, tenant string) string {
	if mode != "input" {
		return name
	}
	return name + "/" + tenant
}

// Excludes reports whether the declaration's environments leave env out. No environments means
// every environment, never an implied "production only".
func (d Declaration) Excludes(env string) bool {
	return len(d.Environments) > 0 && !slices.Contains(d.Environments, env)
}
