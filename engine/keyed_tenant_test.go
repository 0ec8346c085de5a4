package engine

import (
	"strings"
	"testing"

	"github.com/ultimat3/jobs"
)

// The keys of keyed limits are persisted (slot rows, the rate log): a run of no tenant, and a
// limit by tenant, keep the keys they had before input keys were scoped by tenant, so counts
// written before stay the same counts. An input key of a run of a tenant is scoped by it, in a
// form no unscoped key and no other tenant's key can spell.
func TestKeyedKeysAreScopedByTheRunsTenant(t *testing.T) {
	in := &jobs.KeyedLimit{Key: jobs.ByInput("customer"), Limit: 1}
	ten := &jobs.KeyedLimit{Key: jobs.ByTenant(), Limit: 1}
	for _, c := range []struct{ got, want string }{
		// As before: no tenant, or a tenant key.
		{keyedSlotKey("sync", in, "", "a"), `key:"sync":input.customer=a`},
		{rateKey("sync", in, "", "a", true), `rate:"sync":input.customer=a`},
		{keyedSlotKey("sync", ten, "acme", "acme"), `key:"sync":tenant=acme`},
		{rateKey("sync", ten, "acme", "acme", true), `rate:"sync":tenant=acme`},
		// Scoped.
		{keyedSlotKey("sync", in, "acme", "a"), `key:"sync":@"acme":input.customer=a`},
		{rateKey("sync", in, "acme", "a", true), `rate:"sync":@"acme":input.customer=a`},
	} {
		if c.got != c.want {
			t.Errorf("key %q, want %q", c.got, c.want)
		}
	}
	// A tenant cannot spell another tenant's key, nor a tenant-less one, whatever its name holds.
	seen := map[string]string{}
	for _, c := range []struct{ tenant, value string }{
		{"", "other"}, {"other", "other"}, {"acme", "other"},
		{`acme":input.customer=other`, "x"}, {`acme"`, `:input.customer=other`},
		{"acme", `x"@"other":input.customer=y`}, {strings.Repeat("t", 65), "v"}, {strings.Repeat("t", 66), "v"},
	} {
		k := keyedSlotKey("sync", in, c.tenant, c.value)
		if prev, dup := seen[k]; dup {
			t.Errorf("tenant %q value %q and %s share the key %q", c.tenant, c.value, prev, k)
		}
		seen[k] = c.tenant + "/" + c.value
	}
	// A long tenant is named by its digest: the key grows by a bounded amount.
	long := strings.Repeat("é", 500)
	k := keyedSlotKey("sync", in, long, "a")
	if strings.Contains(k, long) || len(k) > len(`key:"sync":input.customer=a`)+80 {
		t.Errorf("the key of a %d-byte tenant is %d bytes: %q", len(long), len(k), k)
	}
	if keyedSlotKey("sync", in, long+"x", "a") == k {
		t.Error("two long tenants share a key")
	}
	if got := inTenant(in, "acme"); got != ` in tenant "acme"` {
		t.Errorf("inTenant = %q", got)
	}
	if got := inTenant(in, "") + inTenant(ten, "acme"); got != "" {
		t.Errorf("inTenant of an unscoped key = %q", got)
	}
}
