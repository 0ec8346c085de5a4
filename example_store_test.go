package jobs_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/postgres"
	"github.com/ultimat3/jobs/store/sqlite"
	"github.com/ultimat3/jobs/worker"
)

// onboardOn runs one onboarding to completion on st, as an application would, every error
// checked, and returns the welcome. The fake clock only makes the three-day sleep instant.
func onboardOn(ctx context.Context, st store.Store) (string, error) {
	clk := clock.NewFake(time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC))
	eng, err := engine.New(engine.Config{Store: st, Clock: clk, AllowUndeclared: true})
	if err != nil {
		return "", err
	}
	if err := eng.Start(ctx); err != nil {
		return "", err
	}
	defer eng.Stop(context.WithoutCancel(ctx))

	reg, err := jobs.NewRegistry(Onboard)
	if err != nil {
		return "", err
	}
	w, err := worker.New(worker.Config{Frontend: eng, Registry: reg, Clock: clk})
	if err != nil {
		return "", err
	}
	if err := w.Start(ctx); err != nil {
		return "", err
	}
	defer w.Stop(context.WithoutCancel(ctx))

	run, err := Onboard.Enqueue(ctx, eng, Signup{OrgID: "acme"})
	if err != nil {
		return "", err
	}
	if _, err := awaitState(ctx, eng, run.RunID, store.StateSuspended); err != nil {
		return "", err
	}
	clk.Advance(72 * time.Hour)
	eng.Tick(ctx)
	if _, err := awaitWait(ctx, eng, run.RunID); err != nil {
		return "", err
	}
	if _, err := eng.Publish(ctx, "plan.chosen", PlanChosen{OrgID: "acme", Plan: "pro"}); err != nil {
		return "", err
	}
	done, err := awaitState(ctx, eng, run.RunID, store.StateCompleted)
	if err != nil {
		return "", err
	}
	return Onboard.Result(done.Result)
}

// awaitState polls until the run is in state, or ctx ends.
func awaitState(ctx context.Context, eng *engine.Engine, id string, state store.State) (store.Run, error) {
	for {
		run, err := eng.GetRun(ctx, id)
		if err != nil {
			return run, err
		}
		if run.State == state {
			return run, nil
		}
		if run.State.Finished() {
			return run, fmt.Errorf("run %s ended %s (%s %s)", id, run.State, run.ErrorCode, run.Error)
		}
		select {
		case <-ctx.Done():
			return run, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// awaitWait polls until the run is suspended on its event wait (past the sleep).
func awaitWait(ctx context.Context, eng *engine.Engine, id string) (store.Run, error) {
	for {
		evs, err := eng.History(ctx, id, 0)
		if err != nil {
			return store.Run{}, err
		}
		if n := len(evs); n > 0 && evs[n-1].Name == "plan" {
			return awaitState(ctx, eng, id, store.StateSuspended)
		}
		select {
		case <-ctx.Done():
			return store.Run{}, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// The engine embedded on a SQLite file: the default store of a single process.
func Example_sqlite() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir, err := os.MkdirTemp("", "jobs-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "jobs.db")})
	if err != nil {
		log.Fatal(err) // X_STORE_LOCKED if another engine holds the file
	}
	defer st.Close()

	welcome, err := onboardOn(ctx, st)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(welcome)
	// Output: welcome acme: pro plan on db-acme
}

// The same on Postgres, in a schema of its own beside the application's tables. It runs when
// TEST_DATABASE_URL names a database, and is skipped otherwise.
func TestExamplePostgres(t *testing.T) {
	t.Parallel()
	url, schema := testenv.FreshSchema(t) // skips without TEST_DATABASE_URL; dropped at cleanup
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := postgres.Open(ctx, postgres.Config{URL: url, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	welcome, err := onboardOn(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if welcome != "welcome acme: pro plan on db-acme" {
		t.Fatalf("welcome %q", welcome)
	}
}
