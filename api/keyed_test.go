package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
)

// Over the JSON admin API an enqueue whose input lacks the field a job's keyed limit counts by
// is refused, 400 X_FLOW_KEY, and nothing is created; an input that has it is accepted.
func TestKeyedLimitKeyRefusedOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t, api.Config{})
	j := jobs.MustDefine("sync", func(in map[string]any) string { return "" }, jobs.NoTenant[map[string]any](),
		func(*jobs.Ctx, map[string]any) (int, error) { return 0, nil },
		jobs.ConcurrencyBy(jobs.ByInput("customer.id"), 2), jobs.RateBy(jobs.ByInput("customer.id"), 5, time.Minute))
	testenv.Declare(t, b.env.Engine, "w", j)
	body := `{"job":"sync","key":"k","noTenant":true,"input":{"customer":{"name":"x"}}}`
	status, _, out := b.call(t, "POST", "/v1/runs", "application/json", "", []byte(body))
	if status != http.StatusBadRequest || jsonCode(t, out) != jobs.CodeFlowKey {
		t.Fatalf("status %d %s, want 400 X_FLOW_KEY", status, out)
	}
	runs, err := b.env.Engine.ListRuns(t.Context(), store.ListParams{})
	if err != nil || len(runs) != 0 {
		t.Errorf("%d runs (%v) after a refused enqueue", len(runs), err)
	}
	body = `{"job":"sync","key":"k","noTenant":true,"input":{"customer":{"id":7}}}`
	if status, _, out := b.call(t, "POST", "/v1/runs", "application/json", "", []byte(body)); status >= 300 {
		t.Fatalf("status %d %s for an input with the field", status, out)
	}
}
