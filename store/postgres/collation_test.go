package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/postgres"
	"github.com/ultimat3/jobs/store/storetest"
)

// The flow conformance group again, on a database whose collation is not bytewise (ICU en-US, as
// most installs' en_US.UTF-8 is not either): the fair claim's tenant order must still be the
// engine's byte order. On such a database, mixed-case tenants ("a", "B", "c", "D") were served
// about 2:1 before the runs' tenant column compared in "C" (020_tenant_bytes). The ByteOrder
// group too: schedules and queues were listed "a B c D" there.
func TestFairClaimOnADatabaseWhoseCollationIsNotBytewise(t *testing.T) {
	base := os.Getenv("TEST_DATABASE_URL")
	if base == "" {
		t.Skip("TEST_DATABASE_URL is not set (run under scripts/with-postgres.sh)")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "jobs_icu_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name+" LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8' TEMPLATE template0"); err != nil {
		t.Fatalf("create an ICU database (PostgreSQL 15 with ICU, as Debian's): %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("drop %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	storetest.RunGroups(t, func(t *testing.T) store.Store {
		var s [6]byte
		_, _ = rand.Read(s[:])
		return postgres.OpenTest(t, postgres.Config{URL: u.String(), Schema: "jobs_test_" + hex.EncodeToString(s[:])})
	}, "Flow", "ByteOrder")
}
