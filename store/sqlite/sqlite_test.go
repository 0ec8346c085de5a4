package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/sqlite"
	"github.com/ultimat3/jobs/store/storetest"
)

// TestStore holds the SQLite backend to the one conformance suite: each subtest gets its own
// file, so the subtests run in parallel without sharing anything.
func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "jobs.db")})
		if err != nil {
			t.Fatalf("sqlite.Open: %v", err)
		}
		return s // storetest closes it
	})
}
