package testenv

import (
	"testing"

	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
)

// Backend opens a fresh, isolated store for one test.
type Backend struct {
	Name string
	Open func(t testing.TB) store.Store
}

// backends lists every store the behaviour tests run against. SQL backends add themselves in
// backends_sql.go; Postgres only when TEST_DATABASE_URL is set.
var backends = []Backend{
	{Name: "memory", Open: func(testing.TB) store.Store { return memory.New() }},
}

// Backends returns the stores to run behaviour tests against.
func Backends() []Backend { return backends }

// EachBackend runs f as a subtest per backend, each with its own env.
func EachBackend(t *testing.T, o Options, f func(t *testing.T, env *Env)) {
	for _, b := range Backends() {
		t.Run(b.Name, func(t *testing.T) {
			opts := o
			opts.Store = b.Open(t)
			f(t, Start(t, opts))
		})
	}
}
