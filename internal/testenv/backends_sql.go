package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/postgres"
	"github.com/ultimat3/jobs/store/sqlite"
)

func init() {
	backends = append(backends, Backend{Name: "sqlite", Open: OpenSQLite})
	if os.Getenv("TEST_DATABASE_URL") != "" {
		backends = append(backends, Backend{Name: "postgres", Open: OpenPostgres})
	}
}

// OpenSQLite opens a store on a fresh file in the test's temp dir.
func OpenSQLite(t testing.TB) store.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "jobs.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// FreshSchema returns a new schema name, dropped at cleanup. It skips the test when
// TEST_DATABASE_URL is unset.
func FreshSchema(t testing.TB) (url, schema string) {
	t.Helper()
	url = os.Getenv("TEST_DATABASE_URL")
	if url == "" {
		t.Skip("TEST_DATABASE_URL is not set")
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema = "t_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if conn, err := pgx.Connect(ctx, url); err == nil {
			_, _ = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
			_ = conn.Close(ctx)
		}
	})
	return url, schema
}

// OpenPostgres opens a store on a fresh schema of TEST_DATABASE_URL.
func OpenPostgres(t testing.TB) store.Store {
	s, _, _ := OpenPostgresIn(t, 8)
	return s
}

// OpenPostgresIn opens a store of maxConns connections on a fresh schema of TEST_DATABASE_URL,
// for tests that also read the schema's tables themselves: it returns the URL and the schema.
func OpenPostgresIn(t testing.TB, maxConns int) (s *postgres.Store, url, schema string) {
	t.Helper()
	url, schema = FreshSchema(t)
	s, err := postgres.Open(context.Background(), postgres.Config{URL: url, Schema: schema, MaxConns: maxConns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, url, schema
}
