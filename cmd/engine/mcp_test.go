package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/cmd/internal/cli"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
)

// stdioMCP runs `engine mcp` in-process with its stdin and stdout on pipes, and connects the
// SDK's client to them. The command ends when the client closes; its exit code is sent on done.
func stdioMCP(t *testing.T, args ...string) (*sdk.ClientSession, <-chan int, *testenv.LogBuffer) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var errb testenv.LogBuffer
	done := make(chan int, 1)
	go func() {
		root := newRootCmd()
		root.SetContext(context.Background())
		root.SetIn(inR)
		code := cli.Execute(root, append([]string{"mcp"}, args...), outW, &errb)
		_ = outW.Close()
		_ = inR.Close()
		done <- code
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).
		Connect(ctx, &sdk.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		// The command refused before the handshake (or the handshake failed): its exit code is
		// the caller's to read.
		_ = inW.Close()
		_ = outR.Close()
		return nil, done, &errb
	}
	return cs, done, &errb
}

func callText(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

// TestMCPOverStdio serves the tools over stdio against a remote engine: the token's role is
// the caller's (a viewer gets the read tools and X_FORBIDDEN on an action, an admin acts), a
// worker's or a tenant-scoped token is refused before the handshake.
func TestMCPOverStdio(t *testing.T) {
	t.Parallel()
	o := testenv.StartOps(t, memory.New())
	srv, err := api.NewServer(api.Config{Engine: o.Engine, Logger: o.Logger, NoUI: true, Credentials: []api.Credential{
		{Token: "admin-t", Role: api.RoleAdmin}, {Token: "viewer-t", Role: api.RoleViewer},
		{Token: "worker-t", Role: api.RoleWorker}, {Token: "tenant-t", Role: api.RoleViewer, Tenant: "acme"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Drain)
	ctx := context.Background()

	// A viewer.
	cs, done, errb := stdioMCP(t, "--server", ts.URL, "--token", "viewer-t")
	if cs == nil {
		t.Fatalf("viewer: no session: %s", errb)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	if len(names) != 8 || slices.Contains(names, "cancel_run") {
		t.Fatalf("a viewer's tools over stdio: %v", names)
	}
	out, isErr := callText(t, cs, "list_runs", map[string]any{"state": "failed"})
	var page struct{ Runs []struct{ ID string } }
	if isErr || json.Unmarshal([]byte(out), &page) != nil || len(page.Runs) != 1 || page.Runs[0].ID != o.Failed {
		t.Fatalf("list_runs over stdio: %s", out)
	}
	out, _ = callText(t, cs, "dump_history", map[string]any{"run_id": o.Completed})
	if !strings.Contains(out, `"RunStarted"`) && !strings.Contains(out, "RunStarted") {
		t.Fatalf("dump_history over stdio: %s", out)
	}
	if out, isErr = callText(t, cs, "cancel_run", map[string]any{"run_id": o.Suspended}); !isErr || !strings.Contains(out, "X_FORBIDDEN") {
		t.Fatalf("a viewer's cancel over stdio: %s", out)
	}
	if out, isErr = callText(t, cs, "inspect_run", map[string]any{"run_id": "00000000-0000-7000-8000-000000000009"}); !isErr || !strings.Contains(out, "X_RUN_NOT_FOUND") {
		t.Fatalf("an unknown run over stdio: %s", out)
	}
	_ = cs.Close()
	if code := <-done; code != 0 {
		t.Fatalf("engine mcp exited %d after the client closed: %s", code, errb)
	}
	if r, _ := o.Engine.GetRun(ctx, o.Suspended); r.State != store.StateSuspended {
		t.Fatalf("a viewer's refused cancel changed the run: %s", r.State)
	}

	// An admin acts.
	cs, done, errb = stdioMCP(t, "--server", ts.URL, "--token", "admin-t")
	if cs == nil {
		t.Fatalf("admin: no session: %s", errb)
	}
	if out, isErr = callText(t, cs, "cancel_run", map[string]any{"run_id": o.Suspended, "reason": "stdio"}); isErr || !strings.Contains(out, `"cancelled"`) {
		t.Fatalf("an admin's cancel over stdio: %s", out)
	}
	_ = cs.Close()
	if code := <-done; code != 0 {
		t.Fatalf("engine mcp exited %d: %s", code, errb)
	}
	if r, _ := o.Engine.GetRun(ctx, o.Suspended); r.State != store.StateCancelled {
		t.Fatalf("the admin's cancel did not land: %s", r.State)
	}

	// Refused before the handshake.
	for _, token := range []string{"worker-t", "tenant-t"} {
		cs, done, errb := stdioMCP(t, "--server", ts.URL, "--token", token)
		if cs != nil {
			_ = cs.Close()
			t.Fatalf("token %s: served", token)
		}
		if code := <-done; code != 1 || !strings.Contains(errb.String(), "X_FORBIDDEN") {
			t.Fatalf("token %s: exit %d, %s", token, code, errb)
		}
	}
}

// A line that is not JSON-RPC is answered with a JSON-RPC error and skipped, and the session
// serves on; at the end of stdin the requests still in flight are answered before engine mcp
// exits 0. Raw lines, as a script piping into engine mcp sends them.
func TestMCPOverStdioSurvivesABadLine(t *testing.T) {
	t.Parallel()
	o := testenv.StartOps(t, memory.New())
	srv, err := api.NewServer(api.Config{Engine: o.Engine, Logger: o.Logger, NoUI: true, Token: "admin-t"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Drain)

	lines := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"sh","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_runs","arguments":{"state":"failed"}}}`,
		`garbage`,
		``,
		`{"a":1}`,
		`  {"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"inspect_run","arguments":{"run_id":"` + o.Failed + `"}}}  `,
	}
	var errb testenv.LogBuffer
	var out bytes.Buffer
	root := newRootCmd()
	root.SetContext(context.Background())
	root.SetIn(strings.NewReader(strings.Join(lines, "\n") + "\n")) // stdin ends right after the last request
	code := cli.Execute(root, []string{"mcp", "--server", ts.URL, "--token", "admin-t", "--timeout", "10s"}, &out, &errb)
	if code != 0 {
		t.Fatalf("engine mcp exited %d: %s\nstdout: %s", code, errb.String(), out.String())
	}
	type reply struct {
		ID     any             `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	results := map[float64]string{}
	var errs []int
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var r reply
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("stdout line %q: %v", l, err)
		}
		switch {
		case r.ID == nil && r.Error != nil:
			errs = append(errs, r.Error.Code)
		case r.Error == nil:
			results[r.ID.(float64)] = string(r.Result)
		default:
			t.Errorf("an error for request %v: %s", r.ID, l)
		}
	}
	if len(errs) != 2 || errs[0] != -32700 || errs[1] != -32600 {
		t.Errorf("errors answered %v, want the parse error -32700 and the invalid request -32600", errs)
	}
	if len(results) != 3 || !strings.Contains(results[2], o.Failed) || !strings.Contains(results[3], o.Failed) {
		t.Errorf("answers %v, want requests 1, 2 and 3 answered, 2 and 3 naming the failed run\nstdout: %s", results, out.String())
	}
}

// lineFilter answers an over-long line with a parse error and hands on the lines around it,
// trimmed, the last one even without its newline.
func TestMCPLineFilter(t *testing.T) {
	t.Parallel()
	msg := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	in := strings.NewReader(msg + "\n" + strings.Repeat("x", 200) + "\n\t" + msg + "\r\n" + msg)
	var answered bytes.Buffer
	f := &lineFilter{in: bufio.NewReaderSize(in, 16), out: &answered, max: len(msg) + 2}
	got, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Repeat(msg+"\n", 3); string(got) != want {
		t.Errorf("handed on %q, want %q", got, want)
	}
	if !strings.Contains(answered.String(), `"code":-32700`) || strings.Count(answered.String(), "\n") != 1 {
		t.Errorf("answered %q, want one parse error", answered.String())
	}
}
