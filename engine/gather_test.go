package engine_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// slowClaims makes every claim take a few milliseconds, so that workers' polls overlap, and
// counts the claims made for several workers at once.
type slowClaims struct {
	store.Store
	claims, gathered atomic.Int64
}

func (s *slowClaims) RunClaim(ctx context.Context, p store.ClaimParams) ([]store.Run, error) {
	s.claims.Add(1)
	if len(p.Shares) > 1 {
		s.gathered.Add(1)
	}
	time.Sleep(3 * time.Millisecond)
	return s.Store.RunClaim(ctx, p)
}

// Four workers polling one engine at once share claims (matching/gather.go), and every run
// claimed for one of them in a shared claim is run and completed by that worker on its first
// attempt: the lease each is handed is its own, on every backend.
func TestWorkersThatPollTogetherShareClaims(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			st := &slowClaims{Store: b.Open(t)}
			eng := startEngine(t, st)
			var done atomic.Int64
			def := jobs.MustDefine("gather.share", func(i int) string { return fmt.Sprint(i) }, jobs.NoTenant[int](),
				func(c *jobs.Ctx, i int) (int, error) {
					out, err := jobs.Step(c, "double", func(context.Context) (int, error) { return 2 * i, nil })
					done.Add(1)
					return out, err
				})
			reg, err := jobs.NewRegistry(def)
			if err != nil {
				t.Fatal(err)
			}
			const runs = 200
			ids := make([]string, runs)
			for i := range runs {
				res, err := def.Enqueue(t.Context(), eng, i)
				if err != nil {
					t.Fatal(err)
				}
				ids[i] = res.RunID
			}
			for i := range 4 {
				w, err := worker.New(worker.Config{Frontend: eng, Registry: reg, ID: fmt.Sprint("w", i), Concurrency: 4,
					PollWait: time.Second, Logger: testenv.Logger()})
				if err != nil {
					t.Fatal(err)
				}
				if err := w.Start(context.Background()); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = w.Stop(context.Background()) })
			}
			deadline := time.Now().Add(60 * time.Second)
			for _, id := range ids {
				for {
					r, err := eng.GetRun(t.Context(), id)
					if err != nil {
						t.Fatal(err)
					}
					if r.State == store.StateCompleted {
						if r.Attempt != 1 {
							t.Errorf("run %s completed on attempt %d, want 1", id, r.Attempt)
						}
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("run %s is %s after 60s (worker %q)", id, r.State, r.WorkerID)
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			t.Logf("%d claims, %d of them shared, for %d runs on 4 workers", st.claims.Load(), st.gathered.Load(), runs)
			if st.gathered.Load() == 0 {
				t.Errorf("no claim was shared by the workers' polls")
			}
		})
	}
}
