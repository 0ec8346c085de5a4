package postgres

import (
	"context"
	"fmt"
	"testing"

	"github.com/ultimat3/jobs/store"
)

// BenchmarkRunCreateBulk measures RunCreateBulk's fast path (binary COPY, fresh keys) for a batch
// of 256 runs, untenanted and spread over four tenants, with its allocations.
func BenchmarkRunCreateBulk(b *testing.B) {
	for _, tenants := range []int{0, 4} {
		b.Run(fmt.Sprintf("tenants=%d", tenants), func(b *testing.B) {
			s := OpenTest(b, Config{MaxConns: 2})
			ctx := context.Background()
			ps := make([]store.CreateRunParams, 256)
			b.ReportAllocs()
			k := 0
			for b.Loop() {
				b.StopTimer()
				for i := range ps {
					ps[i] = newRun(k, "q")
					if tenants > 0 {
						ps[i].Run.Tenant = fmt.Sprintf("t%d", k%tenants)
					} else {
						ps[i].Run.NoTenant = true
					}
					k++
				}
				b.StartTimer()
				if _, err := s.RunCreateBulk(ctx, ps); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
