package engine_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
)

// refusesOne is an archive that cannot take one run (an object store's size limit, a name it
// refuses): every archive of that run fails, every other one succeeds. It counts the archives of
// each run.
type refusesOne struct {
	mu     sync.Mutex
	refuse string
	got    map[string]int
}

func (a *refusesOne) ArchiveRun(_ context.Context, run store.Run, _ []history.Event) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if run.ID == a.refuse {
		return errors.New("object too large")
	}
	a.got[run.ID]++
	return nil
}

func (a *refusesOne) count(id string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.got[id]
}

// One run whose archive always fails is kept, and reported, but it does not stop retention:
// the runs archived around it are deleted, so a later sweep neither archives them again (a
// stream archive would hold each of them once per sweep) nor stops at the same run for ever.
func TestRetentionArchiveFailureOfOneRunDoesNotStopTheOthers(t *testing.T) {
	t.Parallel()
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			archive := &refusesOne{got: map[string]int{}}
			env := retentionEnv(t, b.Open(t), engine.RetentionConfig{Every: 1000 * time.Hour, Archive: archive, Batch: 2})
			ctx := context.Background()
			var ids []string
			for _, k := range []string{"a", "b", "c", "d", "e"} {
				id := enqueueIn(t, env, "never", k)
				if _, err := env.Engine.Cancel(ctx, id, "test"); err != nil {
					t.Fatal(err)
				}
				ids = append(ids, id)
				env.Fake().Advance(time.Second) // listed in this order, oldest finish first
			}
			archive.refuse = ids[1] // b: in the first batch, after a

			env.Fake().Advance(8 * 24 * time.Hour)
			for sweep := 1; sweep <= 2; sweep++ {
				rep, err := env.Engine.SweepRetention(ctx, false)
				if jobs.CodeOf(err) != jobs.CodeStoreUnavailable {
					t.Errorf("sweep %d: %v, want the archive's failure reported as X_STORE_UNAVAILABLE", sweep, err)
				}
				if sweep == 1 && (rep.Runs != 4 || rep.Archived != 4) {
					t.Errorf("sweep 1: %+v; want the 4 runs archived and deleted", rep)
				}
				if sweep == 2 && rep.Runs != 0 {
					t.Errorf("sweep 2: %+v; want nothing left to delete", rep)
				}
			}
			if _, err := env.Engine.GetRun(ctx, ids[1]); err != nil {
				t.Errorf("the run whose archive failed was deleted: %v", err)
			}
			for _, id := range append([]string{ids[0]}, ids[2:]...) {
				if _, err := env.Engine.GetRun(ctx, id); jobs.CodeOf(err) != jobs.CodeRunNotFound {
					t.Errorf("run %s after two sweeps: %v, want deleted", id, err)
				}
				if n := archive.count(id); n != 1 {
					t.Errorf("run %s archived %d times, want once", id, n)
				}
			}
		})
	}
}
