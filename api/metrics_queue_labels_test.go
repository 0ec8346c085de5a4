package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store/memory"
)

// With --allow-undeclared, a tenant's operator may enqueue on any queue name and cancel what it
// enqueued. Each made-up name must not become series of /metrics: not the engine's counters and
// histograms, which would keep it for the life of the process, nor the queue gauges, which would
// list it at every scrape while its runs are kept. The queues a worker declares keep their own
// series; the others are summed under queue="undeclared".
func TestMadeUpQueuesShareOneMetricsLabel(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()}) // AllowUndeclared
	srv, err := api.NewServer(api.Config{Engine: env.Engine, Logger: env.Logger, Registerer: prometheus.NewRegistry(),
		Credentials: []api.Credential{{Token: "tok", Role: api.RoleAdmin}, {Token: "acme", Role: api.RoleOperator, Tenant: "acme"}}})
	if err != nil {
		t.Fatal(err)
	}
	b := serveBundle(t, env, srv, "tok")
	acme, err := api.NewClient(b.url, "acme")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(acme.Close)
	testenv.Declare(t, env.Engine, "w1", testenv.UntypedTenanted("parcel", "parcels"))
	ctx := context.Background()
	enqueue := func(job, queue, key string) string {
		t.Helper()
		res, err := acme.Enqueue(ctx, jobs.EnqueueRequest{Job: job, Queue: queue, Key: key, Tenant: "acme"})
		if err != nil {
			t.Fatal(err)
		}
		return res.RunID
	}
	const cancelled, waiting = 40, 3
	for i := range cancelled + waiting {
		id := enqueue("anything", fmt.Sprintf("q-%d-%s", i, strings.Repeat("x", 900)), fmt.Sprint(i))
		if i < cancelled {
			if _, err := acme.Cancel(ctx, id, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := acme.Cancel(ctx, enqueue("parcel", "parcels", "p1"), ""); err != nil {
		t.Fatal(err)
	}
	enqueue("parcel", "parcels", "p2")

	st, _, out := b.call(t, http.MethodGet, "/metrics", "", "tok", nil)
	if st != http.StatusOK {
		t.Fatalf("metrics = %d %s", st, out)
	}
	body := string(out)
	if n := strings.Count(body, `queue="q-`); n != 0 {
		t.Errorf("%d series are labelled with a made-up queue name", n)
	}
	for series, want := range map[string]float64{
		`jobs_total{outcome="cancelled",queue="undeclared",source="engine"}`:      cancelled,
		`jobs_run_duration_seconds_count{outcome="cancelled",queue="undeclared"}`: cancelled,
		`queue_depth{queue="undeclared"}`:                                         waiting,
		`queue_runs{queue="undeclared",state="cancelled"}`:                        cancelled,
		`jobs_total{outcome="cancelled",queue="parcels",source="engine"}`:         1,
		`queue_depth{queue="parcels"}`:                                            1,
		`queue_runs{queue="parcels",state="cancelled"}`:                           1,
	} {
		if got, found := value(body, series); !found || got != want {
			t.Errorf("%s = %v (found %t), want %v", series, got, found, want)
		}
	}
}
