package systems

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ultimat3/jobs/bench/internal/measure"
)

// Section 12: backlog drain, River's own benchmark shape. A backlog of n no-op jobs is inserted
// in bulk and committed before the window opens, with no worker running; the timed part starts
// the workers and stops when every job is completed.
const (
	ScenarioDrain32  = "drain32"  // the backlog drained by 32 workers
	ScenarioDrain100 = "drain100" // the same with 100 workers
)

// DrainScenarios maps each drain scenario to its worker count, in report order.
var DrainScenarios = []struct {
	Scenario string
	Workers  int
}{{ScenarioDrain32, 32}, {ScenarioDrain100, 100}}

// DrainWorkers returns the worker count of a drain scenario (0 if it is not one).
func DrainWorkers(scenario string) int {
	for _, d := range DrainScenarios {
		if d.Scenario == scenario {
			return d.Workers
		}
	}
	return 0
}

// Drainer is implemented by systems measured on the backlog drain (ours, River). Drain inserts
// n no-op jobs with the system's bulk insert (untimed, on a pool of its own that is closed, and
// its statistics flushed, before Drain returns) and returns the timed part: start `workers`
// workers and return once all n are completed, verified by a count in the system's table.
type Drainer interface {
	Drain(ctx context.Context, n, workers int) (Measure, error)
}

// loadAppName tags the connections of a drain's untimed load, so that Drain can wait until
// their backends have exited: a backend flushes its statistics at exit, and the harness's
// baseline must include the load's writes rather than charge them to the window.
const loadAppName = "bench_drain_load"

// loadURL is dbURL with the load's application_name.
func loadURL(dbURL string) (string, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("application_name", loadAppName)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// settleLoad finishes a drain's untimed load: it refreshes the planner's statistics of the loaded
// tables on the load's pool (so that neither system's claim is planned against an empty table,
// nor re-analyzed by autovacuum mid-window), closes that pool, and waits until its backends have
// exited and flushed their statistics. The wait watches pg_stat_activity from the server's
// "postgres" database, so that it adds nothing to the run database's counters.
func settleLoad(ctx context.Context, dbURL string, load *pgxpool.Pool, tables ...string) error {
	for _, t := range tables {
		if _, err := load.Exec(ctx, `ANALYZE `+t); err != nil {
			load.Close()
			return fmt.Errorf("analyze %s: %w", t, err)
		}
	}
	load.Close()
	u, err := url.Parse(dbURL)
	if err != nil {
		return err
	}
	db := strings.TrimPrefix(u.Path, "/")
	u.Path = "/postgres"
	conn, err := pgx.Connect(ctx, u.String())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return measure.WaitGone(ctx, conn, db, loadAppName, 15*time.Second)
}
