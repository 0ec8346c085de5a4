package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store/memory"
)

// POST /v1/retention/run reads its body: empty or {} (the client's) sweeps, anything else (a
// field it does not name, not an object, trailing data) is X_BAD_REQUEST and sweeps nothing,
// so a caller who meant an option ({"dry_run":true}) is told rather than answered with a real
// sweep.
func TestRetentionRunBody(t *testing.T) {
	t.Parallel()
	// The sweeper's own interval is far beyond the test's clock: only the calls below sweep.
	env := testenv.Start(t, testenv.Options{Store: memory.New(), Retention: engine.RetentionConfig{Every: 10_000 * time.Hour}})
	srv, err := api.NewServer(api.Config{Engine: env.Engine, Logger: env.Logger})
	if err != nil {
		t.Fatal(err)
	}
	b := serveBundle(t, env, srv, "")
	res, err := env.Engine.Enqueue(t.Context(), jobs.EnqueueRequest{Job: "j", Key: "k", NoTenant: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Engine.Cancel(t.Context(), res.RunID, "test"); err != nil {
		t.Fatal(err)
	}
	env.Advance(engine.DefaultRetention + time.Hour)
	for _, body := range []string{`{"bogus":1}`, `{"dry_run":true}`, `[1]`, `"x"`, `1`, `{} {}`, `{`} {
		st, _, out := b.call(t, http.MethodPost, "/v1/retention/run", "application/json", "", []byte(body))
		if st != http.StatusBadRequest || jsonCode(t, out) != jobs.CodeBadRequest {
			t.Errorf("POST /v1/retention/run %s = %d %s; want 400 X_BAD_REQUEST", body, st, out)
		}
		if _, err := env.Engine.GetRun(t.Context(), res.RunID); err != nil {
			t.Fatalf("a refused sweep (%s) deleted the run: %v", body, err)
		}
	}
	rep, err := b.client.Retention(t.Context(), false) // the client's {}
	if err != nil || rep.Runs != 1 {
		t.Fatalf("the client's sweep: %+v, %v; want the cancelled run deleted", rep, err)
	}
	if _, err := env.Engine.GetRun(t.Context(), res.RunID); !jobs.HasCode(err, jobs.CodeRunNotFound) {
		t.Fatalf("after the sweep: %v; want X_RUN_NOT_FOUND", err)
	}
	if st, _, out := b.call(t, http.MethodPost, "/v1/retention/run", "application/json", "", nil); st != http.StatusOK {
		t.Fatalf("an empty body: %d %s; want 200", st, out)
	}
}
