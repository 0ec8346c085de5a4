package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
)

// /mcp serves one JSON-RPC message a request. A batch (a body that is a JSON array, leading
// whitespace or not) is refused with 400 X_BAD_REQUEST before any call in it runs: the SDK ran
// every call of a batch at once and held every answer for one reply, so one body of MaxBody
// bytes was some 20,000 tool calls, and a batch repeating an id dropped a call unanswered. A
// single message is served as before.
func TestMCPServesOneMessageARequest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := testenv.StartOps(t, testenv.Backends()[0].Open(t))
	base := serveAPI(t, o)
	post := func(body string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, base+api.MCPPath, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer admin-t")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		out, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return res.StatusCode, out
	}
	call := func(id int, name string, args map[string]any) string {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call",
			"params": map[string]any{"name": name, "arguments": args}})
		return string(b)
	}
	cancel := call(1, "cancel_run", map[string]any{"run_id": o.Suspended, "reason": "batched"})
	retry := call(1, "retry_run", map[string]any{"run_id": o.Failed})
	many := make([]string, 200)
	for i := range many {
		many[i] = call(i, "list_runs", map[string]any{"limit": 500})
	}
	for what, body := range map[string]string{
		"a batch of one action":       "[" + cancel + "]",
		"a batch repeating an id":     "[" + cancel + "," + retry + "]",
		"a batch after whitespace":    " \r\n\t[" + cancel + "]",
		"a batch of many reads":       "[" + strings.Join(many, ",") + "]",
		"a batch of a notification":   `[{"jsonrpc":"2.0","method":"notifications/initialized"}]`,
		"a batch of no valid message": `[{"id":1,"method":"tools/list"}]`,
	} {
		st, out := post(body)
		var eb api.ErrorBody
		if st != http.StatusBadRequest || json.Unmarshal(out, &eb) != nil || eb.Error == nil || eb.Error.Code != jobs.CodeBadRequest ||
			!strings.Contains(eb.Error.Message, "batch") {
			t.Errorf("%s: %d %.300s; want 400 X_BAD_REQUEST naming the batch", what, st, out)
		}
	}
	if v, err := o.Engine.InspectRun(ctx, o.Suspended); err != nil || v.State != store.StateSuspended {
		t.Fatalf("a refused batch cancelled the run: %s %v", v.State, err)
	}
	if v, err := o.Engine.InspectRun(ctx, o.Failed); err != nil || v.State != store.StateFailed || len(v.Retries) != 0 {
		t.Fatalf("a refused batch retried the run: %s %d %v", v.State, len(v.Retries), err)
	}

	// A body over MaxBody is still 413, whether its whitespace or its message runs over.
	for what, body := range map[string]string{
		"whitespace over MaxBody": strings.Repeat(" ", 3<<20) + "[" + cancel + "]",
		"a message over MaxBody":  `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"x":"` + strings.Repeat("x", 3<<20) + `"}}}`,
	} {
		st, out := post(body)
		var eb api.ErrorBody
		if st != http.StatusRequestEntityTooLarge || json.Unmarshal(out, &eb) != nil || eb.Error == nil || eb.Error.Code != jobs.CodePayloadTooLarge {
			t.Errorf("%s: %d %.300s; want 413 X_PAYLOAD_TOO_LARGE", what, st, out)
		}
	}

	// One message a request is served, leading whitespace and all.
	st, out := post("\n  " + cancel)
	if st != http.StatusOK || !strings.Contains(string(out), `\"state\":\"cancelled\"`) {
		t.Fatalf("one cancel_run: %d %.300s", st, out)
	}
	if v, _ := o.Engine.InspectRun(ctx, o.Suspended); v.State != store.StateCancelled {
		t.Fatalf("the cancel did not land: %s", v.State)
	}
	st, out = post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list","params":{}}`, 9))
	if st != http.StatusOK || !strings.Contains(string(out), `"list_runs"`) {
		t.Fatalf("tools/list: %d %.300s", st, out)
	}
}
