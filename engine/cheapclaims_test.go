package engine_test

import (
	"testing"

	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store/postgres"
)

// The engine tells its in-process workers what its store says of its claims: cheap on Postgres
// (they commit without waiting for a flush), not on SQLite or in memory.
func TestEngineSaysWhetherClaimsAreCheap(t *testing.T) {
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		_, pg := env.Store.(*postgres.Store)
		if got := env.Engine.CheapClaims(); got != pg {
			t.Errorf("%T: CheapClaims %v, want %v", env.Store, got, pg)
		}
	})
}
