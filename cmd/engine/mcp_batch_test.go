package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/cmd/internal/cli"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
)

// engine mcp serves one JSON-RPC message a line. A batch line is answered with -32600 for
// each call in it (by its id; id null when it holds none) and skipped, no call in it runs, and
// the session serves on. The SDK's transport ended the session, engine mcp exiting 1 with
// X_INTERNAL, on a batch repeating an id or nested deeper than its limit, though each of its
// messages passed the line filter.
func TestMCPOverStdioRefusesABatchLine(t *testing.T) {
	t.Parallel()
	o := testenv.StartOps(t, memory.New())
	srv, err := api.NewServer(api.Config{Engine: o.Engine, Logger: o.Logger, NoUI: true, Token: "admin-t"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Drain)

	cancel := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"cancel_run","arguments":{"run_id":"` + o.Suspended + `"}}}`
	deep := `{"jsonrpc":"2.0","id":8,"method":"ping","params":{"_meta":{"x":` + strings.Repeat("[", 997) + strings.Repeat("]", 997) + `}}}`
	lines := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"sh","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`[` + cancel + `,` + cancel + `]`, // an id repeated
		`[` + deep + `]`,                  // each message within the SDK's depth, the line not
		`[` + cancel + `,{"jsonrpc":"2.0","id":"b","method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"}]`,
		`[{"jsonrpc":"2.0","method":"notifications/initialized"}]`,
		`{"jsonrpc":"2.0","id":3,"method":"ping"}`,
	}
	var errb testenv.LogBuffer
	var out bytes.Buffer
	root := newRootCmd()
	root.SetContext(context.Background())
	root.SetIn(strings.NewReader(strings.Join(lines, "\n") + "\n"))
	code := cli.Execute(root, []string{"mcp", "--server", ts.URL, "--token", "admin-t", "--timeout", "10s"}, &out, &errb)
	if code != 0 {
		t.Fatalf("engine mcp exited %d: %s\nstdout: %s", code, errb.String(), out.String())
	}
	type reply struct {
		ID     any             `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var batch []reply
		if json.Unmarshal([]byte(l), &batch) != nil {
			var r reply
			if err := json.Unmarshal([]byte(l), &r); err != nil {
				t.Fatalf("stdout line %q: %v", l, err)
			}
			batch = []reply{r}
		}
		var ids []string
		for _, r := range batch {
			switch {
			case r.Error == nil:
				ids = append(ids, "ok:"+jsonText(r.ID))
			case r.Error.Code == -32600 && strings.Contains(r.Error.Message, "batch"):
				ids = append(ids, "batch:"+jsonText(r.ID))
			default:
				ids = append(ids, "other:"+l)
			}
		}
		got = append(got, strings.Join(ids, ","))
	}
	// The filter answers a line as it reads it, the SDK a call when it is done: the answers
	// come in either order.
	want := []string{"ok:1", "batch:7,batch:7", "batch:8", "batch:7,batch:\"b\"", "batch:null", "ok:3"}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("answers %q, want %q\nstdout: %s", got, want, out.String())
	}
	if v, err := o.Engine.InspectRun(context.Background(), o.Suspended); err != nil || v.State != store.StateSuspended {
		t.Fatalf("a refused batch cancelled the run: %s %v", v.State, err)
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
