package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

type parcel struct {
	ID   string `json:"id"`
	Fail bool   `json:"fail"`
}

var deliver = jobs.MustDefine("deliver", func(p parcel) string { return p.ID }, jobs.NoTenant[parcel](),
	func(ctx *jobs.Ctx, p parcel) (string, error) {
		if _, err := jobs.Step(ctx, "pick", func(context.Context) (int, error) { return 1, nil }); err != nil {
			return "", err
		}
		if p.Fail {
			return "", jobs.Errorf(jobs.CodeBadRequest, "no such address")
		}
		if err := jobs.SleepFor(ctx, time.Minute); err != nil {
			return "", err
		}
		return "delivered", nil
	}, jobs.Queue("parcels"))

// The engine itself exports what it records (jobs_total, job_leases_lost_total, source="engine")
// and the histograms a person tunes it with; a scrape of the API's /metrics finds each.
func TestEngineMetrics(t *testing.T) {
	t.Parallel()
	b := setup(t, api.Config{Token: "tok"})
	env := b.env
	ctx := context.Background()
	env.Worker(worker.Config{}, deliver)
	ok, err := deliver.Enqueue(ctx, env.Engine, parcel{ID: "p1"})
	if err != nil {
		t.Fatal(err)
	}
	bad, err := deliver.Enqueue(ctx, env.Engine, parcel{ID: "p2", Fail: true})
	if err != nil {
		t.Fatal(err)
	}
	env.Await(bad.RunID, store.StateFailed)
	env.Await(ok.RunID, store.StateSuspended)
	env.Advance(time.Minute) // the sleep's timer fires, a little late or on time
	env.Await(ok.RunID, store.StateCompleted)

	// A claim whose holder vanished: the engine reclaims it when the lease lapses.
	if _, err := env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "orphan", Queue: "orphans", Key: "o1", NoTenant: true}); err != nil {
		t.Fatal(err)
	}
	testenv.Declare(t, env.Engine, "gone", testenv.Untyped("orphan", "orphans"))
	if tasks, err := env.Engine.Poll(ctx, frontend.PollRequest{WorkerID: "gone", Queues: []string{"orphans"}, Max: 1}); err != nil || len(tasks) != 1 {
		t.Fatalf("poll: %v %v", tasks, err)
	}
	cancelled, err := env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "orphan", Queue: "orphans", Key: "o2", NoTenant: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Engine.Cancel(ctx, cancelled.RunID, "test"); err != nil {
		t.Fatal(err)
	}
	env.Advance(time.Minute)

	want := map[string]func(float64) bool{
		`jobs_total{outcome="completed",queue="parcels",source="engine"}`:      eq(1),
		`jobs_total{outcome="failed",queue="parcels",source="engine"}`:         eq(1),
		`jobs_total{outcome="cancelled",queue="orphans",source="engine"}`:      eq(1),
		`job_leases_lost_total{queue="orphans",source="engine"}`:               eq(1),
		`jobs_run_duration_seconds_count{outcome="completed",queue="parcels"}`: eq(1),
		`jobs_run_duration_seconds_sum{outcome="completed",queue="parcels"}`:   func(v float64) bool { return v >= 60 },
		`jobs_step_commit_seconds_count`:                                       func(v float64) bool { return v >= 2 },
		// At least three group commits: both runs' first steps can share one, p1's sleep and p2's
		// failure the next, p1's completion after its timer the last.
		`jobs_commit_batch_size_count`:       func(v float64) bool { return v >= 3 },
		`jobs_commit_duration_seconds_count`: func(v float64) bool { return v >= 3 },
		`jobs_timer_lag_seconds_count`:       func(v float64) bool { return v >= 1 },
		`queue_depth{queue="orphans"}`:       eq(1),
	}
	var body string
	waitUntil(t, func() error {
		body = scrape(t, b)
		var unmet []string
		for series, ok := range want {
			if v, found := value(body, series); !found || !ok(v) {
				unmet = append(unmet, fmt.Sprintf("%s = %v (found %t)", series, v, found))
			}
		}
		if len(unmet) > 0 {
			return fmt.Errorf("these series are not as wanted: %s", strings.Join(unmet, "; "))
		}
		return nil
	})

	// The shipped Grafana dashboard is built from these series: every metric it queries is one
	// the engine exports (a worker's share of jobs_total and job_leases_lost_total has the same
	// names, labelled source="worker").
	raw, err := os.ReadFile("../docs/grafana/jobs.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("docs/grafana/jobs.json: %v", err)
	}
	names := regexp.MustCompile(`\b(?:jobs|job|queue)_[a-z_]+\b`)
	queried := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, name := range names.FindAllString(tg.Expr, -1) {
				queried++
				family := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
				if !strings.Contains(body, "# TYPE "+family+" ") {
					t.Errorf("panel %q queries %s, which /metrics does not export", p.Title, name)
				}
			}
		}
	}
	if queried < 10 {
		t.Errorf("the dashboard queries only %d series", queried)
	}
}

// A worker that is gone for certain (its session dropped, it stopped, or a process started again
// under its id) has its claims released at once rather than when their leases lapse. Those runs
// may run twice just the same, and the worker that held them counts nothing, so the engine counts
// them as leases lost and its release line is a warning, as loud as a lapsed lease's; a release
// that finds nothing running counts nothing and stays at info.
func TestEngineCountsTheClaimsItReleasesAsLeasesLost(t *testing.T) {
	t.Parallel()
	var logs testenv.LogBuffer
	env := testenv.Start(t, testenv.Options{Store: memory.New(), Logger: logs.Logger()})
	srv, err := api.NewServer(api.Config{Engine: env.Engine, Token: "tok", Logger: env.Logger})
	if err != nil {
		t.Fatal(err)
	}
	b := serveBundle(t, env, srv, "tok")
	ctx := context.Background()
	testenv.Declare(t, env.Engine, "host-a", testenv.Untyped("orphan", "orphans"))
	for _, key := range []string{"o1", "o2"} {
		if _, err := env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "orphan", Queue: "orphans", Key: key, NoTenant: true}); err != nil {
			t.Fatal(err)
		}
	}
	if tasks, err := env.Engine.Poll(ctx, frontend.PollRequest{WorkerID: "host-a", Queues: []string{"orphans"}, Max: 2}); err != nil || len(tasks) != 2 {
		t.Fatalf("poll: %v %v", tasks, err)
	}
	series := `job_leases_lost_total{queue="orphans",source="engine"}`
	if v, found := value(scrape(t, b), series); found && v != 0 {
		t.Fatalf("%s = %v before any release", series, v)
	}
	// The process that held them died; a new one starts under the same id.
	if err := env.Engine.WorkerStart(ctx, frontend.Session{WorkerID: "host-a"}); err != nil {
		t.Fatal(err)
	}
	if v, _ := value(scrape(t, b), series); v != 2 {
		t.Fatalf("%s = %v after the release of two running claims, want 2", series, v)
	}
	// A release that finds nothing running counts nothing.
	if err := env.Engine.WorkerStop(ctx, frontend.Session{WorkerID: "host-a"}); err != nil {
		t.Fatal(err)
	}
	if v, _ := value(scrape(t, b), series); v != 2 {
		t.Fatalf("%s = %v after a release of nothing, want 2", series, v)
	}

	var released []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "msg=jobs.worker.released") {
			released = append(released, l)
		}
	}
	if len(released) != 2 {
		t.Fatalf("release lines %q, want two", released)
	}
	if !strings.Contains(released[0], "level=WARN") || !strings.Contains(released[0], "why=start") || !strings.Contains(released[0], "reclaimed=2") {
		t.Errorf("the release of two running claims logged %q, want a warning with reclaimed=2", released[0])
	}
	if !strings.Contains(released[1], "level=INFO") || !strings.Contains(released[1], "why=stop") || !strings.Contains(released[1], "reclaimed=0") {
		t.Errorf("a release of nothing running logged %q, want info with reclaimed=0", released[1])
	}
}

func eq(n float64) func(float64) bool { return func(v float64) bool { return v == n } }

func scrape(t *testing.T, b *bundle) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, b.url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer tok")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	return string(out)
}

func value(body, series string) (float64, bool) {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(m[1], 64)
	return v, err == nil
}
