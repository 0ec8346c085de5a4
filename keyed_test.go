package jobs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/codec"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/postgres"
	"github.com/ultimat3/jobs/store/sqlite"
	"github.com/ultimat3/jobs/worker"
)

type syncInput struct {
	Customer string `json:"customer"`
	N        int    `json:"n"`
}

// syncJob is a no-op job of tenant "acme" with the given options.
func syncJob(opts ...jobs.Option) *jobs.Job[syncInput, int] {
	return jobs.MustDefine("sync", func(in syncInput) string { return in.Customer + "-" + fmt.Sprint(in.N) },
		jobs.TenantFrom(func(in syncInput) string { return in.Customer }),
		func(*jobs.Ctx, syncInput) (int, error) { return 0, nil }, append([]jobs.Option{jobs.Queue("sync")}, opts...)...)
}

// pollAll claims every run the engine hands worker w now.
func pollAll(t *testing.T, fe frontend.Frontend, w string) []frontend.Task {
	t.Helper()
	tasks, err := fe.Poll(t.Context(), frontend.PollRequest{WorkerID: w, Queues: []string{"sync"}, Max: 20,
		Limits: map[string]int{"sync": 100}})
	if err != nil {
		t.Fatal(err)
	}
	return tasks
}

func complete(t *testing.T, fe frontend.Frontend, w string, task frontend.Task) {
	t.Helper()
	out, _ := jobs.Encode(0)
	if _, err := fe.Record(t.Context(), frontend.RecordRequest{RunID: task.RunID, Fence: task.Fence, WorkerID: w,
		LeaseToken: task.LeaseToken, AfterSeq: task.LastSeq, Commands: []frontend.Command{{Kind: frontend.CmdComplete, Output: out}}}); err != nil {
		t.Fatal(err)
	}
}

func customers(t *testing.T, tasks []frontend.Task) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, task := range tasks {
		var in syncInput
		if err := jobs.Decode(task.Input, &in); err != nil {
			t.Fatal(err)
		}
		out[in.Customer]++
	}
	return out
}

// handedBack is the engine's count of hand-backs for reason, over every queue.
func handedBack(t *testing.T, env *testenv.Env, reason string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	for _, c := range env.Engine.Collectors() {
		if err := reg.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0.0
	for _, f := range fams {
		if f.GetName() != jobs.MetricClaimsHandedBack {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

func waiting(t *testing.T, env *testenv.Env, id string) (store.Run, string) {
	t.Helper()
	v, err := env.Engine.InspectRun(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	run, err := env.Store.RunGet(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return run, v.Waiting
}

// At most N runs of a job run at once per value of an input field, fleet-wide: over it, a claim
// is handed back delayed, no attempt spent, `jobs show` says which cap and which key, and the
// run is claimable again once a slot is free and its delay passed.
func TestKeyedConcurrencyCap(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testenv.Options{RequireDeclared: true}, func(t *testing.T, env *testenv.Env) {
		t.Parallel()
		j := syncJob(jobs.ConcurrencyBy(jobs.ByInput("customer"), 2))
		testenv.Declare(t, env.Engine, "w", j)
		var third string
		for i, c := range []string{"a", "a", "b", "a"} {
			id := enqueue(t, env, j, syncInput{Customer: c, N: i})
			if i == 3 {
				third = id
			}
			env.Fake().Advance(time.Millisecond)
		}
		tasks := pollAll(t, env.Engine, "w")
		if got := customers(t, tasks); got["a"] != 2 || got["b"] != 1 || len(tasks) != 3 {
			t.Fatalf("claimed %v, want 2 of a and 1 of b", got)
		}
		run, why := waiting(t, env, third)
		if run.State != store.StateDelayed || run.Attempt != 1 {
			t.Fatalf("the run over the cap is %s at attempt %d, want delayed at attempt 1", run.State, run.Attempt)
		}
		if !strings.Contains(why, "keyed concurrency cap") || !strings.Contains(why, `input.customer = "a"`) {
			t.Errorf("waiting: %q, want the keyed cap and the key", why)
		}
		if n := handedBack(t, env, "key_cap"); n != 1 {
			t.Errorf("jobs_claims_handed_back_total{reason=key_cap} = %v, want 1", n)
		}
		// Its delay passed, but both of a's slots are held: handed back again.
		env.Advance(engine.SlotRetry)
		if tasks := pollAll(t, env.Engine, "w"); len(tasks) != 0 {
			t.Fatalf("claimed %d runs with a's cap full", len(tasks))
		}
		for _, task := range tasks {
			complete(t, env.Engine, "w", task)
		}
		env.Advance(engine.SlotRetry)
		// The run is ready once Advance returns; a claim may still pass over it for a moment
		// (SKIP LOCKED) while the engine's own timer loop holds it in a fire that finds nothing
		// left to do. A run handed back again would be delayed, and stay unclaimed here.
		var again []frontend.Task
		for deadline := time.Now().Add(5 * time.Second); len(again) == 0 && time.Now().Before(deadline); {
			if again = pollAll(t, env.Engine, "w"); len(again) == 0 {
				time.Sleep(10 * time.Millisecond)
			}
		}
		if len(again) != 1 || again[0].RunID != third || again[0].Attempt != 1 {
			t.Fatalf("after a's runs finished: claimed %v, want %s at attempt 1", again, third)
		}
	})
}

// N starts per period per tenant, fleet-wide, counted in the store: over it the claim is handed
// back, delayed until the store says room comes back (not claimable before), no attempt spent.
func TestKeyedRateLimit(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testenv.Options{RequireDeclared: true}, func(t *testing.T, env *testenv.Env) {
		t.Parallel()
		j := syncJob(jobs.RateBy(jobs.ByTenant(), 2, time.Minute))
		testenv.Declare(t, env.Engine, "w", j)
		start := env.Clock.Now()
		ids := map[string]string{}
		for i, c := range []string{"a", "a", "b", "a"} {
			ids[fmt.Sprint(c, i)] = enqueue(t, env, j, syncInput{Customer: c, N: i})
		}
		tasks := pollAll(t, env.Engine, "w")
		if got := customers(t, tasks); got["a"] != 2 || got["b"] != 1 {
			t.Fatalf("claimed %v, want 2 of a and 1 of b", got)
		}
		held := ""
		for _, id := range ids {
			if run, _ := waiting(t, env, id); run.State == store.StateDelayed {
				held = id
			}
		}
		run, why := waiting(t, env, held)
		if run.Attempt != 1 {
			t.Errorf("the rate-limited run is at attempt %d, want 1", run.Attempt)
		}
		until := start.Add(time.Minute).UTC().Format(time.RFC3339Nano)
		if want := `rate limited by tenant = "a" until ` + until; !strings.Contains(why, want) {
			t.Errorf("waiting: %q, want %q", why, want)
		}
		if n := handedBack(t, env, "key_rate"); n != 1 {
			t.Errorf("jobs_claims_handed_back_total{reason=key_rate} = %v, want 1", n)
		}
		// Finishing a's runs frees nothing: a rate counts starts, not runs in flight.
		for _, task := range tasks {
			complete(t, env.Engine, "w", task)
		}
		env.Advance(59 * time.Second)
		if tasks := pollAll(t, env.Engine, "w"); len(tasks) != 0 {
			t.Fatalf("claimed %d runs before a's allowance came back", len(tasks))
		}
		env.Advance(time.Second)
		again := pollAll(t, env.Engine, "w")
		if len(again) != 1 || again[0].RunID != held || again[0].Attempt != 1 {
			t.Fatalf("once the minute passed: claimed %v, want %s at attempt 1", again, held)
		}
	})
}

// A worker manifest cannot loosen a keyed limit: the engine enforces the tightest any current
// declaration holds, whatever another worker declares or a poll says.
func TestHostileManifestCannotRaiseAKeyedLimit(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testenv.Options{RequireDeclared: true}, func(t *testing.T, env *testenv.Env) {
		t.Parallel()
		honest := syncJob(jobs.ConcurrencyBy(jobs.ByInput("customer"), 1), jobs.RateBy(jobs.ByTenant(), 2, time.Hour))
		testenv.Declare(t, env.Engine, "honest", honest)
		testenv.Declare(t, env.Engine, "loose", syncJob(jobs.ConcurrencyBy(jobs.ByInput("customer"), 50), jobs.RateBy(jobs.ByTenant(), 1000, time.Second)))
		testenv.Declare(t, env.Engine, "none", syncJob())
		for i := range 4 {
			enqueue(t, env, honest, syncInput{Customer: "a", N: i})
		}
		for _, w := range []string{"none", "loose"} {
			if n := len(pollAll(t, env.Engine, w)); n > 1 {
				t.Fatalf("worker %s was handed %d runs of one customer; the declared cap is 1", w, n)
			}
		}
		// A declaration that cannot be enforced is refused whole.
		for name, d := range map[string]jobs.JobDeclaration{
			"limit 0":    {Queue: "sync", Attempts: 1, KeyedConcurrency: &jobs.KeyedLimit{Key: "tenant", Limit: 0}},
			"empty path": {Queue: "sync", Attempts: 1, KeyedConcurrency: &jobs.KeyedLimit{Key: "input.", Limit: 1}},
			"bad key":    {Queue: "sync", Attempts: 1, KeyedConcurrency: &jobs.KeyedLimit{Key: "header.x", Limit: 1}},
			"no period":  {Queue: "sync", Attempts: 1, KeyedRate: &jobs.KeyedLimit{Key: "tenant", Limit: 3}},
		} {
			data, _ := json.Marshal(d)
			_, err := env.Engine.DeclareManifest(t.Context(), frontend.Manifest{WorkerID: "hostile", Queues: []string{"sync"},
				Declarations: []jobs.Declaration{{Kind: jobs.DeclareJob, Name: "sync", Data: data}}})
			if jobs.CodeOf(err) != jobs.CodeJobDefinition {
				t.Errorf("%s: %v, want %s", name, err, jobs.CodeJobDefinition)
			}
		}
	})
}

// Options and enqueues the keyed limits cannot count are refused with a clear code, and create
// nothing.
func TestKeyedLimitRefusals(t *testing.T) {
	t.Parallel()
	for name, opt := range map[string]jobs.Option{
		"cap 0":        jobs.ConcurrencyBy(jobs.ByTenant(), 0),
		"empty path":   jobs.ConcurrencyBy(jobs.ByInput(""), 1),
		"empty field":  jobs.ConcurrencyBy(jobs.ByInput("a..b"), 1),
		"unknown form": jobs.ConcurrencyBy("customer", 1),
		"rate 0":       jobs.RateBy(jobs.ByTenant(), 0, time.Minute),
		"no period":    jobs.RateBy(jobs.ByTenant(), 1, 0),
	} {
		if _, err := jobs.Define("x", func(int) string { return "" }, jobs.NoTenant[int](),
			func(*jobs.Ctx, int) (int, error) { return 0, nil }, opt); jobs.CodeOf(err) != jobs.CodeJobDefinition {
			t.Errorf("%s: %v, want %s", name, err, jobs.CodeJobDefinition)
		}
	}
	env := testenv.Start(t, testenv.Options{Store: testenv.Backends()[0].Open(t), RequireDeclared: true})
	j := syncJob(jobs.ConcurrencyBy(jobs.ByInput("account.id"), 1))
	testenv.Declare(t, env.Engine, "w", j)
	sealed, err := codec.Seal("aes", true, []byte("opaque"))
	if err != nil {
		t.Fatal(err)
	}
	for name, input := range map[string]any{
		"no field":  map[string]any{"account": map[string]any{"name": "x"}},
		"not a map": map[string]any{"account": "x"},
		"an object": map[string]any{"account": map[string]any{"id": map[string]any{}}},
		"empty":     map[string]any{"account": map[string]any{"id": ""}},
		"too long":  map[string]any{"account": map[string]any{"id": strings.Repeat("x", jobs.MaxKeyValue+1)}},
		"no input":  nil,
		"sealed":    sealed,
	} {
		b, ok := input.([]byte)
		if !ok {
			b, _ = jobs.Encode(input)
		}
		_, err := env.Engine.Enqueue(t.Context(), jobs.EnqueueRequest{Job: "sync", Key: name, Tenant: "t", Input: b})
		if jobs.CodeOf(err) != jobs.CodeFlowKey {
			t.Errorf("%s: %v, want %s", name, err, jobs.CodeFlowKey)
		}
	}
	runs, _ := env.Engine.ListRuns(t.Context(), store.ListParams{Limit: 10})
	if len(runs) != 0 {
		t.Errorf("refused enqueues created %d runs", len(runs))
	}
	b, _ := jobs.Encode(map[string]any{"account": map[string]any{"id": 42}})
	if _, err := env.Engine.Enqueue(t.Context(), jobs.EnqueueRequest{Job: "sync", Key: "ok", Tenant: "t", Input: b}); err != nil {
		t.Errorf("a numeric key: %v", err)
	}
}

// The rate's counts live in the store: an engine restarted on the same SQLite file, or a second
// engine on the same Postgres schema, grants no fresh allowance.
func TestKeyedRateSurvivesARestart(t *testing.T) {
	t.Parallel()
	type reopen func(t *testing.T) store.Store
	path := filepath.Join(t.TempDir(), "jobs.db")
	backends := map[string]reopen{
		"sqlite": func(t *testing.T) store.Store {
			s, err := sqlite.Open(context.Background(), sqlite.Config{Path: path})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	}
	var url, schema string
	backends["postgres"] = func(t *testing.T) store.Store {
		if url == "" {
			url, schema = testenv.FreshSchema(t)
		}
		s, err := postgres.Open(context.Background(), postgres.Config{URL: url, Schema: schema, MaxConns: 4})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for name, open := range backends {
		t.Run(name, func(t *testing.T) {
			fake := clock.NewFake(time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC))
			j := syncJob(jobs.RateBy(jobs.ByTenant(), 2, time.Hour))
			life := func(i int, wantStarted int) {
				s := open(t)
				defer s.Close()
				eng, err := engine.New(engine.Config{Store: s, Clock: fake, PollFallback: 50 * time.Millisecond, Logger: testenv.Logger()})
				if err != nil {
					t.Fatal(err)
				}
				if err := eng.Start(context.Background()); err != nil {
					t.Fatal(err)
				}
				defer eng.Stop(context.Background())
				testenv.Declare(t, eng, "w", j)
				in, _ := jobs.Encode(syncInput{Customer: "a", N: i})
				fresh := map[string]bool{}
				for k := range 2 {
					res, err := eng.Enqueue(t.Context(), jobs.EnqueueRequest{Job: "sync", Key: fmt.Sprint(i, "-", k), Tenant: "a", Input: in})
					if err != nil {
						t.Fatal(err)
					}
					fresh[res.RunID] = true
				}
				// The runs an earlier engine claimed, their leases lapsed, may be claimed again:
				// each is the start it already counted. This engine's new runs are new starts.
				started := 0
				for _, task := range pollAll(t, eng, "w") {
					if fresh[task.RunID] {
						started++
					}
				}
				if started != wantStarted {
					t.Fatalf("engine %d: started %d new runs of a, want %d", i, started, wantStarted)
				}
				fake.Advance(time.Minute)
			}
			life(1, 2) // the hour's allowance is spent
			life(2, 0) // a new engine on the same store: still spent
		})
	}
}

// Keyed caps hold under concurrent workers: four workers, forty runs over three customers, at
// most two running per customer at any moment, counted inside the job.
func TestKeyedCapUnderConcurrentWorkers(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testenv.Options{Clock: clock.Real{}}, func(t *testing.T, env *testenv.Env) {
		t.Parallel()
		var mu sync.Mutex
		running, peak := map[string]int{}, map[string]int{}
		j := jobs.MustDefine("sync", func(in syncInput) string { return in.Customer + fmt.Sprint(in.N) }, jobs.NoTenant[syncInput](),
			func(c *jobs.Ctx, in syncInput) (int, error) {
				mu.Lock()
				running[in.Customer]++
				peak[in.Customer] = max(peak[in.Customer], running[in.Customer])
				mu.Unlock()
				time.Sleep(15 * time.Millisecond)
				mu.Lock()
				running[in.Customer]--
				mu.Unlock()
				return 0, nil
			}, jobs.Queue("sync"), jobs.ConcurrencyBy(jobs.ByInput("customer"), 2))
		for range 4 {
			env.Worker(worker.Config{Concurrency: 8}, j)
		}
		var ids []string
		for i := range 40 {
			ids = append(ids, enqueue(t, env, j, syncInput{Customer: []string{"a", "b", "c"}[i%3], N: i}))
		}
		for _, id := range ids {
			if run := env.Await(id, store.StateCompleted); run.Attempt != 1 {
				t.Fatalf("run %s finished at attempt %d: a hand-back spent an attempt", id, run.Attempt)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		for c, p := range peak {
			if p > 2 {
				t.Errorf("customer %s peaked at %d running, cap 2", c, p)
			}
		}
	})
}

// A run claimed again before it recorded anything (handed back by its worker's own limits, its
// worker restarted, its lease lapsed) is the same start under jobs.RateBy, not a second one: it
// was counted again and then held back for a whole period behind its own first claim.
func TestARunClaimedAgainIsOneStartUnderItsRate(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"worker-hand-back", "worker-restart", "lease-lapse"} {
		for _, b := range testenv.Backends() {
			t.Run(how+"/"+b.Name, func(t *testing.T) {
				env := testenv.Start(t, testenv.Options{Store: b.Open(t), RequireDeclared: true})
				j := syncJob(jobs.RateBy(jobs.ByTenant(), 1, time.Hour))
				testenv.Declare(t, env.Engine, "w", j)
				id := enqueue(t, env, j, syncInput{Customer: "a", N: 1})
				tasks := pollAll(t, env.Engine, "w")
				if len(tasks) != 1 {
					t.Fatalf("first claim: %d tasks", len(tasks))
				}
				task := tasks[0]
				switch how {
				case "worker-hand-back": // what a worker does over its LimitConfig
					if _, err := env.Engine.Record(t.Context(), frontend.RecordRequest{RunID: task.RunID, Fence: task.Fence, WorkerID: "w",
						LeaseToken: task.LeaseToken, AfterSeq: task.LastSeq,
						Commands: []frontend.Command{{Kind: frontend.CmdRelease, Code: "tenant_cap", Error: "local cap"}}}); err != nil {
						t.Fatal(err)
					}
				case "worker-restart":
					if err := env.Engine.WorkerStart(t.Context(), frontend.Session{WorkerID: "w"}); err != nil {
						t.Fatal(err)
					}
				case "lease-lapse":
					env.Advance(31 * time.Second)
				}
				if again := pollAll(t, env.Engine, "w"); len(again) != 1 {
					run, why := waiting(t, env, id)
					t.Fatalf("claimed again: %d tasks; the run is %s, waiting %q", len(again), run.State, why)
				}
			})
		}
	}
}

// The same for keyed rates: a rate per run id, "slower" by its numbers, cannot replace a rate per
// tenant.
func TestKeyedRatesOfDifferentKeysAllHold(t *testing.T) {
	t.Parallel()
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) { keyedRatesOfDifferentKeys(t, b.Open(t)) })
	}
}

func keyedRatesOfDifferentKeys(t *testing.T, st store.Store) {
	env := testenv.Start(t, testenv.Options{Store: st, RequireDeclared: true})
	honest := syncJob(jobs.RateBy(jobs.ByTenant(), 2, time.Hour))
	testenv.Declare(t, env.Engine, "honest", honest)
	testenv.Declare(t, env.Engine, "other", syncJob(jobs.RateBy(jobs.ByInput("n"), 1, time.Hour)))
	for i := range 4 {
		enqueue(t, env, honest, syncInput{Customer: "a", N: i})
		env.Fake().Advance(time.Millisecond)
	}
	if n := len(pollAll(t, env.Engine, "honest")); n != 2 {
		t.Fatalf("%d runs of tenant a started within the hour, want 2 (the per-tenant rate)", n)
	}
}
