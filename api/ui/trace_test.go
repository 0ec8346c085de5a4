package ui_test

import (
	"html"
	"net/http"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store/memory"
)

// The run detail page shows who enqueued the run and the trace it was enqueued under.
func TestRunPageShowsActorAndTrace(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	res, err := env.Engine.Enqueue(t.Context(), jobs.EnqueueRequest{Job: "invite", Key: "k", Tenant: "acme",
		EnqueuedBy: "user:42 <ops>", TraceParent: tp})
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, serve(t, env, ""))
	st, page := b.get("/_x/runs/" + res.RunID)
	want(t, "run page", st, page, http.StatusOK, html.EscapeString("user:42 <ops>"), "4bf92f3577b34da6a3ce929d0e0e4736", tp)
}
