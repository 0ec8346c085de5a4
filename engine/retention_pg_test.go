package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/internal/testenv"
)

// TestRetentionBoundsABusyPostgres: a steady load of runs that finish, day after day of the
// engine's clock, with the sweeper doing its work: the runs and history tables stop growing at
// about a retention period's worth of runs, instead of growing with every day.
func TestRetentionBoundsABusyPostgres(t *testing.T) {
	t.Parallel()
	st, url, schema := testenv.OpenPostgresIn(t, 4)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	count := func(table string) int {
		var n int
		if err := conn.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM %s.%s", schema, table)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	const perDay, keepDays, days = 40, 3, 8
	env := retentionEnv(t, st, engine.RetentionConfig{Completed: keepDays * 24 * time.Hour, Every: 1000 * time.Hour, Batch: 25})
	var runs, events []int
	for day := range days {
		for i := range perDay {
			id := enqueueIn(t, env, "never", fmt.Sprintf("d%d-%d", day, i))
			if _, err := env.Engine.Cancel(ctx, id, "done"); err != nil {
				t.Fatal(err)
			}
		}
		// A day passes, swept every 6 hours of it. The sweeps are called here rather than left
		// to the background loop (TestRetentionSweeperRunsOnTheClock), so the counts below do
		// not race it.
		for range 4 {
			env.Fake().Advance(6 * time.Hour)
			if _, err := env.Engine.SweepRetention(ctx, false); err != nil {
				t.Fatal(err)
			}
		}
		runs = append(runs, count("runs"))
		events = append(events, count("history"))
	}
	t.Logf("runs per day: %v; history rows: %v", runs, events)
	// Without retention day 8 holds 320 runs. With three days' retention it holds the runs of
	// the last three days (swept at day's end), on every day once the first three have passed.
	for day := keepDays; day < days; day++ {
		if runs[day] > (keepDays+1)*perDay {
			t.Errorf("day %d: %d runs, want at most %d (bounded)", day+1, runs[day], (keepDays+1)*perDay)
		}
		if runs[day] != runs[keepDays] || events[day] != events[keepDays] {
			t.Errorf("day %d: %d runs, %d events; day %d had %d, %d: the tables still grow", day+1,
				runs[day], events[day], keepDays+1, runs[keepDays], events[keepDays])
		}
	}
	for _, table := range []string{"timers", "waits", "dedupe", "deliveries"} {
		if n := count(table); n != 0 {
			t.Errorf("%s holds %d rows of deleted runs", table, n)
		}
	}
}
