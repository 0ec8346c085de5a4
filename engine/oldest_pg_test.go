package engine_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/internal/testenv"
)

// An engine that claims oldest-first builds the index that order reads when it starts; one that
// claims in the default, fair order leaves it out, so that its creates do not write it.
func TestOldestFirstEngineBuildsItsIndex(t *testing.T) {
	t.Parallel()
	for _, oldest := range []bool{false, true} {
		st, url, schema := testenv.OpenPostgresIn(t, 4)
		ctx := context.Background()
		e, err := engine.New(engine.Config{Store: st, OldestFirst: oldest})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Stop(context.Background()) })
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		var valid []bool
		rows, err := conn.Query(ctx, `SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = 'runs_ready'`, schema)
		if err == nil {
			valid, err = pgx.CollectRows(rows, pgx.RowTo[bool])
		}
		_ = conn.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case oldest && (len(valid) != 1 || !valid[0]):
			t.Errorf("an oldest-first engine started without a valid runs_ready (%v)", valid)
		case !oldest && len(valid) != 0:
			t.Errorf("a fair engine's schema has runs_ready (%v); its creates would write it", valid)
		}
	}
}
