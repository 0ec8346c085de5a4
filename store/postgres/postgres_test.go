package postgres_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/postgres"
	"github.com/ultimat3/jobs/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestStore runs the conformance suite, each subtest on a schema of its own.
func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return postgres.OpenTest(t, postgres.Config{})
	})
}
