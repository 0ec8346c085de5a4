package postgres

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ultimat3/jobs"
)

func migExec(t *testing.T, u string, qs ...string) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for _, q := range qs {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// A role that may use the tables but not run DDL opens a schema `engine migrate` prepared: the
// ledger is read first, and nothing is created when nothing is missing.
func TestOpenWithoutDDLPrivilegeOnAMigratedSchema(t *testing.T) {
	u := testURL(t)
	schema := FreshSchema(t)
	if err := Migrate(context.Background(), Config{URL: u, Schema: schema}); err != nil {
		t.Fatal(err)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	role := "dml_only_" + hex.EncodeToString(b[:])
	sch := pgx.Identifier{schema}.Sanitize()
	migExec(t, u,
		`CREATE ROLE `+role+` LOGIN`,
		`GRANT USAGE ON SCHEMA `+sch+` TO `+role,
		`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA `+sch+` TO `+role,
		`GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA `+sch+` TO `+role,
		`GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA `+sch+` TO `+role,
	)
	t.Cleanup(func() { migExec(t, u, `DROP OWNED BY `+role, `DROP ROLE `+role) })
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	pu.User = url.User(role)
	n, err := MigrateCount(context.Background(), Config{URL: pu.String(), Schema: schema})
	if err != nil || n != 0 {
		t.Fatalf("MigrateCount as a DML-only role on a migrated schema: %d, %v", n, err)
	}
	s, err := Open(context.Background(), Config{URL: pu.String(), Schema: schema, MaxConns: 2})
	if err != nil {
		t.Fatalf("Open as a DML-only role on a migrated schema: %v", err)
	}
	defer s.Close()
	if _, err := s.RunGet(context.Background(), "none"); !jobs.HasCode(err, jobs.CodeRunNotFound) {
		t.Errorf("RunGet as the DML-only role: %v", err)
	}

	// A schema that lacks a migration still needs DDL, and the refusal is configuration
	// (class 42, insufficient privilege), not a retryable outage.
	migExec(t, u, `DELETE FROM `+sch+`.schema_migrations WHERE version = (SELECT max(version) FROM `+sch+`.schema_migrations)`)
	_, err = MigrateCount(context.Background(), Config{URL: pu.String(), Schema: schema})
	if !jobs.HasCode(err, jobs.CodeDriverUnavailable) {
		t.Errorf("migrate as a DML-only role with a migration missing: %v (code %s), want X_DRIVER_UNAVAILABLE", err, jobs.CodeOf(err))
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncBuf) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncBuf) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// A schema a newer build migrated is used (an older engine of a rolling upgrade runs beside the
// newer ones) and reported; one holding a newer migration marked incompatible is refused.
func TestSchemaNewerThanTheBuild(t *testing.T) {
	u := testURL(t)
	schema := FreshSchema(t)
	if err := Migrate(context.Background(), Config{URL: u, Schema: schema}); err != nil {
		t.Fatal(err)
	}
	sch := pgx.Identifier{schema}.Sanitize()
	migExec(t, u, `INSERT INTO `+sch+`.schema_migrations (version, name) VALUES (999, 'from_the_future')`)

	var logs syncBuf
	log := slog.New(slog.NewTextHandler(&logs, nil))
	n, err := MigrateCount(context.Background(), Config{URL: u, Schema: schema, Logger: log})
	if err != nil || n != 0 {
		t.Fatalf("MigrateCount on a compatible newer schema: %d, %v", n, err)
	}
	if !strings.Contains(logs.String(), "newer than this build") || !strings.Contains(logs.String(), "schema_version=999") {
		t.Errorf("MigrateCount did not report the newer schema: %q", logs.String())
	}
	s, err := Open(context.Background(), Config{URL: u, Schema: schema, MaxConns: 2, Logger: log})
	if err != nil {
		t.Fatalf("Open on a compatible newer schema (a rolling upgrade's older engine): %v", err)
	}
	s.Close()

	migExec(t, u, `INSERT INTO `+sch+`.schema_migrations (version, name) VALUES (1000, 'incompatible_new_claims')`)
	_, err = MigrateCount(context.Background(), Config{URL: u, Schema: schema, Logger: log})
	if !jobs.HasCode(err, jobs.CodeDriverUnavailable) || !strings.Contains(err.Error(), "at version 1000, newer than this build's") {
		t.Errorf("MigrateCount on an incompatible newer schema: %v, want X_DRIVER_UNAVAILABLE naming version 1000", err)
	}
	if s, err := Open(context.Background(), Config{URL: u, Schema: schema, MaxConns: 2, Logger: log}); err == nil {
		s.Close()
		t.Error("Open on an incompatible newer schema succeeded")
	} else if !jobs.HasCode(err, jobs.CodeDriverUnavailable) {
		t.Errorf("Open on an incompatible newer schema: %v, want X_DRIVER_UNAVAILABLE", err)
	}
}

func TestSchemaBeginningWithPgIsBadRequest(t *testing.T) {
	for _, bad := range []string{"pg_jobs", "pg_", "pg_catalog"} {
		if _, err := (Config{URL: "postgres://x", Schema: bad}).withDefaults(); !jobs.HasCode(err, jobs.CodeBadRequest) {
			t.Errorf("schema %q: %v, want X_BAD_REQUEST", bad, err)
		}
	}
	for _, ok := range []string{"pgjobs", "jobs_pg_", "p_g"} {
		if _, err := (Config{URL: "postgres://x", Schema: ok}).withDefaults(); err != nil {
			t.Errorf("schema %q: %v", ok, err)
		}
	}
}

func TestMigrateErrorsAreCodedBySQLSTATE(t *testing.T) {
	for sqlstate, want := range map[string]jobs.Code{
		"42501": jobs.CodeDriverUnavailable, // insufficient privilege
		"42P07": jobs.CodeDriverUnavailable, // duplicate table
		"42939": jobs.CodeDriverUnavailable, // reserved name
		"28P01": jobs.CodeDriverUnavailable, // bad password
		"08006": jobs.CodeStoreUnavailable,  // connection failure
		"40001": jobs.CodeStoreUnavailable,  // serialization failure
		"57P01": jobs.CodeStoreUnavailable,  // admin shutdown
	} {
		err := migrateError(&pgconn.PgError{Code: sqlstate, Message: "x"}, "jobs")
		if got := jobs.CodeOf(err); got != want {
			t.Errorf("SQLSTATE %s: %s, want %s", sqlstate, got, want)
		}
	}
	if got := jobs.CodeOf(migrateError(errors.New("io"), "jobs")); got != jobs.CodeStoreUnavailable {
		t.Errorf("a network error: %s, want X_STORE_UNAVAILABLE", got)
	}
}

// A table of the application's in the way of a migration is configuration, not an outage.
func TestMigrateOverAConflictingTableIsTerminal(t *testing.T) {
	u := testURL(t)
	schema := FreshSchema(t)
	sch := pgx.Identifier{schema}.Sanitize()
	migExec(t, u, `CREATE SCHEMA `+sch, `CREATE TABLE `+sch+`.keys (x int)`)
	_, err := MigrateCount(context.Background(), Config{URL: u, Schema: schema})
	if !jobs.HasCode(err, jobs.CodeDriverUnavailable) {
		t.Errorf("migrate over a conflicting table: %v (code %s), want X_DRIVER_UNAVAILABLE", err, jobs.CodeOf(err))
	}
}
