package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// testURL is the database of the tests (scripts/with-postgres.sh exports it); without it the
// tests skip.
func testURL(t testing.TB) string {
	t.Helper()
	url := os.Getenv("TEST_DATABASE_URL")
	if url == "" {
		t.Skip("TEST_DATABASE_URL is not set (run under scripts/with-postgres.sh)")
	}
	return url
}

// FreshSchema returns a schema name no other test uses and drops that schema when t ends (after
// the cleanups t registers later, such as closing a store on it).
func FreshSchema(t testing.TB) string {
	t.Helper()
	url := testURL(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "jobs_test_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return schema
}

// OpenTest opens a Store on a fresh schema with a small pool (tests run in parallel against
// one server), closed when t ends. cfg's URL and Schema are filled in when empty.
func OpenTest(t testing.TB, cfg Config) *Store {
	t.Helper()
	if cfg.URL == "" {
		cfg.URL = testURL(t)
	}
	if cfg.Schema == "" {
		cfg.Schema = FreshSchema(t)
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = 4
	}
	s, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}
