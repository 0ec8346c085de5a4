package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

type wsOrder struct {
	N string `json:"n"`
	T string `json:"t"`
}

// tsRunView reads GET /v1/runs/{id} as token.
func tsRunView(t *testing.T, b *bundle, id, token string) engine.RunView {
	t.Helper()
	st, _, body := b.call(t, http.MethodGet, "/v1/runs/"+id, "", token, nil)
	var v engine.RunView
	if st != http.StatusOK || json.Unmarshal(body, &v) != nil {
		t.Fatalf("GET run %s as %s: %d %s", id, token, st, body)
	}
	return v
}

// A run's waiting reason, read by a credential scoped to its tenant, names the run's own job
// and queue and nothing of the fleet's manifest: not the queues the job is declared on, not the
// worker whose limits handed the run back, nor the limit's size. An unscoped credential reads
// the engine's full reason. The manifest went out in this text before, to a caller the manifest
// is otherwise refused to.
func TestATenantsRunViewWaitingNamesNoManifest(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, testenv.Options{}, api.Config{Token: tsAdmin, Credentials: tsCreds})
	byInput := jobs.TenantFrom(func(i wsOrder) string { return i.T })
	key := func(i wsOrder) string { return i.N }
	release := make(chan struct{})
	defer close(release)
	started := make(chan struct{})
	var once sync.Once
	held := jobs.MustDefine("ws-held", key, byInput, func(c *jobs.Ctx, i wsOrder) (int, error) {
		if i.N == "first" {
			once.Do(func() { close(started) })
			<-release
		}
		return 1, nil
	})
	payroll := jobs.MustDefine("ws-payroll", key, byInput, func(c *jobs.Ctx, i wsOrder) (int, error) { return 1, nil },
		jobs.Queue("hr-private"))
	w := b.env.Worker(worker.Config{Limits: worker.LimitConfig{PerTenant: 1}}, held, payroll)

	// Declared on another queue than the run's.
	elsewhere, err := b.env.Engine.Enqueue(t.Context(), jobs.EnqueueRequest{Job: "ws-payroll", Queue: "nope", Key: "k", Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	// Handed back by the worker's LimitConfig.PerTenant: its note names the worker.
	if _, err := held.Enqueue(t.Context(), b.env.Engine, wsOrder{N: "first", T: "acme"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("the first run's body did not start")
	}
	second, err := held.Enqueue(t.Context(), b.env.Engine, wsOrder{N: "second", T: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	b.env.Await(second.RunID, store.StateDelayed)
	// The worker's note lands once its hand-back has committed: wait for the admin to read it.
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(tsRunView(t, b, second.RunID, tsAdmin).Waiting, w.ID()) {
		if time.Now().After(deadline) {
			t.Fatalf("the hand-back's note never named the worker: %q", tsRunView(t, b, second.RunID, tsAdmin).Waiting)
		}
		time.Sleep(5 * time.Millisecond)
	}

	cases := []struct {
		run     string
		secrets []string // what the admin is told and acme is not
		scoped  string   // what acme is told
	}{
		{elsewhere.RunID, []string{"hr-private"}, `no worker declares job "ws-payroll" on queue "nope": no worker will claim this run`},
		{second.RunID, []string{w.ID(), "LimitConfig", "1 at once"},
			`tenant_cap: a worker's own limits held the run back when this run was last claimed; it is tried again shortly`},
	}
	for _, c := range cases {
		admin := tsRunView(t, b, c.run, tsAdmin).Waiting
		for _, s := range c.secrets {
			if !strings.Contains(admin, s) {
				t.Errorf("the admin's waiting for %s is %q, want it naming %q", c.run, admin, s)
			}
		}
		for _, token := range []string{"ts-acme-view", "ts-acme-op"} {
			v := tsRunView(t, b, c.run, token)
			if v.Waiting != c.scoped {
				t.Errorf("%s's waiting for %s is %q, want %q", token, c.run, v.Waiting, c.scoped)
			}
			for _, s := range c.secrets {
				if strings.Contains(v.Waiting, s) {
					t.Errorf("%s's waiting for %s names %q: %q", token, c.run, s, v.Waiting)
				}
			}
		}
	}
	// Another tenant is refused the run, as before.
	if st, _, body := b.call(t, http.MethodGet, "/v1/runs/"+second.RunID, "", "ts-other-op", nil); st == http.StatusOK {
		t.Errorf("another tenant read acme's run: %s", body)
	}
}
