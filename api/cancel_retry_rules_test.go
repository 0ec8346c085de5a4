package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/client"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/store"
)

// A cancel's reason and a retry's fromStep, by and reason are held by the engine's one rule
// (at most 1,000 bytes of UTF-8 without NUL): the HTTP API refuses what the in-process client
// and the console refuse, with the same code, and a refused call changes nothing.
func TestCancelAndRetryTextRuleIsTheSameOverHTTP(t *testing.T) {
	b := setup(t, api.Config{Token: tsAdmin, Credentials: tsCreds})
	res, err := b.env.Engine.Enqueue(t.Context(), jobs.EnqueueRequest{Job: "rr-idle", Key: "idle", NoTenant: true, Delay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	id := res.RunID
	local := client.Local(b.env.Engine, nil)
	for what, v := range map[string]string{"64 KiB": strings.Repeat("r", 64<<10), "1,001 bytes": strings.Repeat("r", 1001), "NUL": "a\x00b"} {
		body, _ := json.Marshal(map[string]string{"reason": v})
		st, _, out := b.call(t, http.MethodPost, "/v1/runs/"+id+"/cancel", "application/json", tsAdmin, body)
		if code, _ := tsRefusal(t, out); st != http.StatusBadRequest || code != jobs.CodeBadRequest {
			t.Errorf("HTTP cancel with a reason of %s: %d %s, want 400 X_BAD_REQUEST", what, st, code)
		}
		if _, err := local.Cancel(t.Context(), id, v); !jobs.HasCode(err, jobs.CodeBadRequest) {
			t.Errorf("in-process cancel with a reason of %s: %v", what, err)
		}
		for _, field := range []string{"fromStep", "by", "reason"} {
			body, _ := json.Marshal(map[string]string{field: v})
			st, _, out := b.call(t, http.MethodPost, "/v1/runs/"+id+"/retry", "application/json", tsAdmin, body)
			if code, _ := tsRefusal(t, out); st != http.StatusBadRequest || code != jobs.CodeBadRequest {
				t.Errorf("HTTP retry with a %s of %s: %d %s, want 400 X_BAD_REQUEST", field, what, st, code)
			}
		}
		if _, err := local.Retry(t.Context(), engine.RetryRequest{RunID: id, By: v}); !jobs.HasCode(err, jobs.CodeBadRequest) {
			t.Errorf("in-process retry with a by of %s: %v", what, err)
		}
	}
	if r, _ := b.env.Engine.GetRun(t.Context(), id); r.State != store.StateDelayed {
		t.Fatalf("refused calls left the run %s", r.State)
	}
	body, _ := json.Marshal(map[string]string{"reason": strings.Repeat("r", 1000)})
	if st, _, out := b.call(t, http.MethodPost, "/v1/runs/"+id+"/cancel", "application/json", tsAdmin, body); st != http.StatusOK {
		t.Errorf("HTTP cancel with a reason of 1,000 bytes: %d %s", st, out)
	}
}
