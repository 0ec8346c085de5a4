package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// $JOBS_DB_SCHEMA without a database URL is refused as --database-schema is: it names a Postgres
// schema, and without a URL the engine would start on an empty SQLite file instead, its runs
// nowhere to be seen. Nothing is created under the data directory.
func TestSchemaEnvWithoutURLIsRefused(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("DATABASE_URL", "")
	t.Setenv("JOBS_DB_SCHEMA", "app_jobs")
	for _, args := range [][]string{
		{"migrate", "--data-dir", dir},
		{"serve", "--data-dir", dir, "--addr", "127.0.0.1:0"},
	} {
		// Bounded: an engine that started anyway would serve until its context ends.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		expect(t, runCmd(ctx, args...), 2, `X_BAD_REQUEST: $JOBS_DB_SCHEMA "app_jobs" needs --database-url`)
		cancel()
	}
	if _, err := os.Stat(filepath.Join(dir, "jobs.db")); !os.IsNotExist(err) {
		t.Fatalf("a refused start created the SQLite file: %v", err)
	}
}
