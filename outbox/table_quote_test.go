package outbox

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/testenv"
)

// A table name the store accepts works, even one SQL reserves as a keyword ("order", "user",
// "group"): the name is quoted where it is spliced into the statements. Unquoted, the store took
// the name and then failed every statement with a syntax error, reported as
// X_STORE_UNAVAILABLE, which a caller retries for ever.
func TestATableNamedByAReservedWordWorks(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend, env *testenv.Env) {
		if b.sqlStore == nil {
			t.Skip("the memory store has no table")
		}
		ctx := context.Background()
		st := b.sqlStore(t, b.qualify("order"))
		if err := st.Migrate(ctx); err != nil {
			t.Fatalf("migrate: %v", err)
		}
		if err := st.Migrate(ctx); err != nil {
			t.Fatalf("migrate again: %v", err)
		}
		b.outbox = st
		ob := newOutbox(t, b, env, Required)
		stage(t, b, ob, "a", "b")
		r := newRelay(t, b, env, env.Engine, "r1", 0)
		if n := pass(t, r); n != 2 {
			t.Fatalf("published %d rows, want 2", n)
		}
		if runs := runsOf(t, env); len(runs["note:a"]) != 1 || len(runs["note:b"]) != 1 {
			t.Errorf("runs %v, want one of a and one of b", runs)
		}
		if n, _, err := st.Backlog(ctx); err != nil || n != 0 {
			t.Errorf("backlog %d, %v; want 0", n, err)
		}
		if _, total, err := st.Failed(ctx, 10); err != nil || total != 0 {
			t.Errorf("failed rows %d, %v; want 0", total, err)
		}
		if _, err := st.Prune(ctx, env.Clock.Now().Add(1)); err != nil {
			t.Errorf("prune: %v", err)
		}
	})
}

// Postgres keeps the first 63 bytes of a name and drops the rest without an error, so two
// stores named apart past byte 63 shared one table: a row staged through one was claimed and
// published by the other's relay. The Postgres store and PostgresDDL refuse such a name; SQLite
// keeps whole names and takes it.
func TestAPostgresTableNameLongerThanItKeepsIsRefused(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none") // never dialled
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	long := strings.Repeat("a", 63)
	for _, ok := range []string{long, long + "." + long} {
		if _, err := NewPostgresStore(pool, ok); err != nil {
			t.Errorf("NewPostgresStore(%d bytes): %v", len(ok), err)
		}
		_ = PostgresDDL(ok)
	}
	for _, bad := range []string{long + "_one", long + "b.outbox", "app." + long + "b"} {
		_, err := NewPostgresStore(pool, bad)
		wantCode(t, "NewPostgresStore of a "+sprint(len(bad))+"-byte name", err, jobs.CodeBadRequest)
		func() {
			defer func() {
				if r := recover(); r == nil {
					t.Errorf("PostgresDDL(%q) did not refuse the name", bad)
				}
			}()
			PostgresDDL(bad)
		}()
		if ddl := SQLiteDDL(bad); !strings.Contains(ddl, bad[strings.LastIndexByte(bad, '.')+1:]) {
			t.Errorf("SQLiteDDL(%q): %q", bad, ddl)
		}
	}
}
