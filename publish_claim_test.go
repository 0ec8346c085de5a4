package jobs_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
)

// publishRaces runs a hook inside the store's publish, right before the publish's own
// transaction: a cancel or another worker's claim committing after the engine's last read of
// the run and before the publish.
type publishRaces struct {
	store.Store
	before atomic.Pointer[func(ctx context.Context, p store.PublishParams) error]

	mu        sync.Mutex
	published []string
}

func (s *publishRaces) RunPublish(ctx context.Context, p store.PublishParams) (store.PublishResult, error) {
	if hook := s.before.Swap(nil); hook != nil {
		if err := (*hook)(ctx, p); err != nil {
			return store.PublishResult{}, err
		}
	}
	res, err := s.Store.RunPublish(ctx, p)
	if err == nil {
		s.mu.Lock()
		s.published = append(s.published, p.ID)
		s.mu.Unlock()
	}
	return res, err
}

func (s *publishRaces) publishedIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.published...)
}

// A run's durable publish is made on the condition of its claim, checked by the store in the
// publish's own transaction. A cancel (or another worker's claim after a lapsed lease) that
// commits after the engine's last read of the run and before the publish's transaction refuses
// the publish with the error the record gets: the event is not published, and a run waiting
// for it is not woken.
func TestClaimLostRightBeforeThePublishPublishesNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		lose func(t *testing.T, env *testenv.Env, st *publishRaces, runID string) func(context.Context, store.PublishParams) error
		code jobs.Code
	}{
		{"cancelled", func(t *testing.T, env *testenv.Env, st *publishRaces, runID string) func(context.Context, store.PublishParams) error {
			return func(ctx context.Context, p store.PublishParams) error {
				_, err := env.Engine.Cancel(ctx, runID, "operator cancel racing the publish")
				return err
			}
		}, jobs.CodeAborted},
		{"claimed by another worker", func(t *testing.T, env *testenv.Env, st *publishRaces, runID string) func(context.Context, store.PublishParams) error {
			return func(ctx context.Context, p store.PublishParams) error {
				later := env.Clock.Now().Add(24 * time.Hour)
				if _, err := st.Store.RunExpireLeases(ctx, later, 10); err != nil {
					return err
				}
				runs, err := st.Store.RunClaim(ctx, store.ClaimParams{WorkerID: "other", Queues: []string{"sync"}, Limit: 1,
					Now: later, LeaseUntil: later.Add(time.Minute), StickyBefore: later})
				if err != nil {
					return err
				}
				if len(runs) != 1 || runs[0].ID != runID {
					t.Errorf("another worker claimed %v, want run %s", runs, runID)
				}
				return nil
			}
		}, jobs.CodeJobLeaseLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, b := range testenv.Backends() {
				t.Run(b.Name, func(t *testing.T) {
					st := &publishRaces{Store: b.Open(t)}
					env := testenv.Start(t, testenv.Options{Store: st})
					testenv.Declare(t, env.Engine, "w", syncJob())
					enqueue(t, env, syncJob(), syncInput{Customer: "a", N: 1})
					enqueue(t, env, syncJob(), syncInput{Customer: "a", N: 2})
					tasks := pollAll(t, env.Engine, "w")
					if len(tasks) != 2 {
						t.Fatalf("claimed %d runs, want 2", len(tasks))
					}
					waiter, publisher := tasks[0], tasks[1]
					if err := recordAs(t, env, waiter, frontend.Command{Kind: frontend.CmdWait, Name: "w", Event: "told",
						TimeoutAt: env.Clock.Now().Add(time.Hour)}); err != nil {
						t.Fatal(err)
					}
					if r, _ := env.Engine.GetRun(t.Context(), waiter.RunID); r.State != store.StateSuspended {
						t.Fatalf("waiting run %s, want suspended", r.State)
					}

					hook := tc.lose(t, env, st, publisher.RunID)
					st.before.Store(&hook)
					err := recordAs(t, env, publisher,
						frontend.Command{Kind: frontend.CmdPublish, Name: "p1", Event: "told", Output: []byte{0xc0}})
					if !jobs.HasCode(err, tc.code) {
						t.Fatalf("record: %v, want %s", err, tc.code)
					}
					if st.before.Load() != nil {
						t.Fatal("the record was refused before its publish reached the store")
					}
					if ids := st.publishedIDs(); len(ids) != 0 {
						t.Errorf("published %v for a run whose claim was lost before the publish", ids)
					}
					if r, _ := env.Engine.GetRun(t.Context(), waiter.RunID); r.State != store.StateSuspended {
						t.Errorf("the run waiting for the event is %s, want suspended: the refused publish woke it", r.State)
					}
				})
			}
		})
	}
}
