package mcp_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/client"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/mcp"
	"github.com/ultimat3/jobs/scheduler"
	"github.com/ultimat3/jobs/store"
)

var readTools = []string{mcp.ToolListRuns, mcp.ToolInspectRun, mcp.ToolListQueues, mcp.ToolDeadLetters,
	mcp.ToolManifest, mcp.ToolBackfills, mcp.ToolSchedules, mcp.ToolHistory}

var actionTools = []string{mcp.ToolCancelRun, mcp.ToolRetryRun, mcp.ToolRetryFromStep}

// connectInMemory serves s to an SDK client over the in-memory transport.
func connectInMemory(t *testing.T, s *sdk.Server) *sdk.ClientSession {
	t.Helper()
	ct, st := sdk.NewInMemoryTransports()
	ss, err := s.Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// sched is the fixture's scheduler, with one schedule.
func sched(t *testing.T, o *testenv.Ops) *scheduler.Scheduler {
	t.Helper()
	sc, err := scheduler.New(scheduler.Config{Engine: o.Engine, Logger: o.Logger,
		Schedules: scheduler.Static(scheduler.MustDefine("nightly", o.Greet, "0 3 * * *", "UTC", testenv.OpsInput{Name: "night"}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sc.Stop(context.Background()) })
	return sc
}

func toolNames(t *testing.T, cs *sdk.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		if tl.InputSchema == nil {
			t.Errorf("tool %s has no input schema", tl.Name)
		}
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

// call calls a tool and returns its result; a protocol error fails the test (refusals are tool
// errors, never protocol errors).
func call(t *testing.T, cs *sdk.ClientSession, name string, args any) *sdk.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s(%v): protocol error %v", name, args, err)
	}
	return res
}

func text(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// ok decodes a successful result's structured content into out, and checks its text is the
// same JSON.
func ok(t *testing.T, res *sdk.CallToolResult, out any) {
	t.Helper()
	if res.IsError {
		t.Fatalf("tool error: %s", text(res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
	var fromText, fromStruct any
	if json.Unmarshal([]byte(text(res)), &fromText) != nil || json.Unmarshal(b, &fromStruct) != nil {
		t.Fatalf("the text is not JSON: %s", text(res))
	}
	tb, _ := json.Marshal(fromText)
	sb, _ := json.Marshal(fromStruct)
	if string(tb) != string(sb) {
		t.Fatalf("text and structured content differ:\n%s\n%s", tb, sb)
	}
}

// refused checks a result is a tool error with code, in its text and its structured content.
func refused(t *testing.T, res *sdk.CallToolResult, code jobs.Code) {
	t.Helper()
	if !res.IsError {
		t.Fatalf("want %s, got a result: %s", code, text(res))
	}
	var body mcp.ErrorBody
	if err := json.Unmarshal([]byte(text(res)), &body); err != nil || body.Error == nil || body.Error.Code != code {
		t.Fatalf("want %s, got %s", code, text(res))
	}
	b, _ := json.Marshal(res.StructuredContent)
	if !strings.Contains(string(b), string(code)) {
		t.Fatalf("structured content %s lacks %s", b, code)
	}
}

// TestToolsInMemory calls every tool over the SDK's in-memory transport, on every backend, with
// runs completed, failed, suspended and cancelled, and checks each answer against the client
// API it is built on.
func TestToolsInMemory(t *testing.T) {
	t.Parallel()
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			o := testenv.StartOps(t, b.Open(t))
			c := client.Local(o.Engine, sched(t, o))
			cs := connectInMemory(t, mcp.NewServer(c, mcp.Options{Access: mcp.ReadWrite}))
			exerciseTools(t, o, c, cs)
		})
	}
}

// exerciseTools calls each tool at least once, reads and actions, and bad input.
func exerciseTools(t *testing.T, o *testenv.Ops, c client.Client, cs *sdk.ClientSession) {
	t.Helper()
	ctx := context.Background()
	want := append(slices.Clone(readTools), actionTools...)
	slices.Sort(want)
	if got := toolNames(t, cs); !slices.Equal(got, want) {
		t.Fatalf("tools %v, want %v", got, want)
	}

	var page engine.RunPage
	ok(t, call(t, cs, mcp.ToolListRuns, map[string]any{}), &page)
	if len(page.Runs) != 4 {
		t.Fatalf("list_runs: %d runs", len(page.Runs))
	}
	ok(t, call(t, cs, mcp.ToolListRuns, map[string]any{"state": "suspended"}), &page)
	if len(page.Runs) != 1 || page.Runs[0].ID != o.Suspended {
		t.Fatalf("list_runs suspended: %+v", page.Runs)
	}
	ok(t, call(t, cs, mcp.ToolListRuns, map[string]any{"search": "ada"}), &page)
	if len(page.Runs) != 1 || page.Runs[0].ID != o.Completed {
		t.Fatalf("list_runs search: %+v", page.Runs)
	}
	ok(t, call(t, cs, mcp.ToolListRuns, map[string]any{"limit": 3}), &page)
	if len(page.Runs) != 3 || page.Next == "" {
		t.Fatalf("list_runs limit 3: %+v", page)
	}

	var run engine.RunView
	ok(t, call(t, cs, mcp.ToolInspectRun, map[string]any{"run_id": o.Failed}), &run)
	direct, err := c.GetRun(ctx, o.Failed)
	if err != nil {
		t.Fatal(err)
	}
	if run.State != store.StateFailed || len(run.Attempts) != 1 || !strings.Contains(run.Error, "card declined") ||
		len(run.Steps) != len(direct.Steps) || run.Steps[0].Name != "prepare" {
		t.Fatalf("inspect_run failed: %+v", run)
	}
	ok(t, call(t, cs, mcp.ToolInspectRun, map[string]any{"run_id": o.Suspended}), &run)
	if len(run.Steps) != 1 || run.Steps[0].Kind != "wait" || run.Steps[0].Status != "waiting" {
		t.Fatalf("inspect_run suspended: %+v", run.Steps)
	}

	var queues mcp.QueuesOutput
	ok(t, call(t, cs, mcp.ToolListQueues, map[string]any{}), &queues)
	directQ, _ := c.Queues(ctx)
	if len(queues.Queues) != 2 || len(directQ) != 2 {
		t.Fatalf("list_queues: %+v", queues)
	}
	for _, q := range queues.Queues {
		if q.Queue == "payments" && q.Dead != 1 {
			t.Fatalf("payments: %+v", q)
		}
	}

	ok(t, call(t, cs, mcp.ToolDeadLetters, map[string]any{"queue": "payments"}), &page)
	if len(page.Runs) != 1 || page.Runs[0].ID != o.Failed {
		t.Fatalf("list_dead_letters: %+v", page)
	}

	var m engine.ManifestView
	ok(t, call(t, cs, mcp.ToolManifest, map[string]any{}), &m)
	if len(m.Workers) != 1 || !slices.ContainsFunc(m.Declarations, func(d engine.DeclarationView) bool { return d.Name == "ops-flaky" }) {
		t.Fatalf("inspect_manifest: %+v", m)
	}

	var bf mcp.BackfillsOutput
	ok(t, call(t, cs, mcp.ToolBackfills, map[string]any{}), &bf)
	if bf.Backfills == nil {
		t.Fatalf("list_backfills: %+v", bf)
	}
	ok(t, call(t, cs, mcp.ToolBackfills, map[string]any{"tenant": "nobody"}), &bf)
	if bf.Backfills == nil || len(bf.Backfills) != 0 {
		t.Fatalf("list_backfills of a tenant with no pass: %+v", bf)
	}

	var sc mcp.SchedulesOutput
	ok(t, call(t, cs, mcp.ToolSchedules, map[string]any{}), &sc)
	if len(sc.Schedules) != 1 || sc.Schedules[0].Name != "nightly" {
		t.Fatalf("list_schedules: %+v", sc)
	}
	ok(t, call(t, cs, mcp.ToolSchedules, map[string]any{"name": "nightly"}), &sc)
	refused(t, call(t, cs, mcp.ToolSchedules, map[string]any{"name": "weekly"}), jobs.CodeScheduleNotFound)

	res := call(t, cs, mcp.ToolHistory, map[string]any{"run_id": o.Completed})
	var dump strings.Builder
	if err := c.DumpHistory(ctx, o.Completed, &dump); err != nil {
		t.Fatal(err)
	}
	if res.IsError || text(res) != dump.String() {
		t.Fatalf("dump_history text is not the dump:\n%s\nwant\n%s", text(res), dump.String())
	}
	if evs, err := history.Load(strings.NewReader(text(res))); err != nil || evs[0].Kind != history.KindRunStarted {
		t.Fatalf("the dump does not load: %v", err)
	}
	var ho mcp.HistoryOutput
	b, _ := json.Marshal(res.StructuredContent)
	if json.Unmarshal(b, &ho) != nil || ho.RunID != o.Completed || len(ho.Events) != strings.Count(dump.String(), "\n") {
		t.Fatalf("dump_history structured: %s", b)
	}

	// Bad input: a tool error with the code, never a protocol error or a panic.
	refused(t, call(t, cs, mcp.ToolInspectRun, map[string]any{}), jobs.CodeBadRequest)
	refused(t, call(t, cs, mcp.ToolInspectRun, map[string]any{"run_id": 42}), jobs.CodeBadRequest)
	refused(t, call(t, cs, mcp.ToolInspectRun, map[string]any{"run_id": "00000000-0000-7000-8000-000000000009"}), jobs.CodeRunNotFound)
	refused(t, call(t, cs, mcp.ToolListRuns, map[string]any{"state": "lost"}), jobs.CodeBadRequest)
	refused(t, call(t, cs, mcp.ToolListRuns, map[string]any{"limit": "ten"}), jobs.CodeBadRequest)
	refused(t, call(t, cs, mcp.ToolListRuns, map[string]any{"limit": 100000}), jobs.CodeBadRequest)
	// The page by the HTTP API's rule (package paging): a limit of 0 is refused, not read as the
	// default, and a cursor is a run id, not text that would answer the first page.
	for _, tool := range []string{mcp.ToolListRuns, mcp.ToolDeadLetters} {
		refused(t, call(t, cs, tool, map[string]any{"limit": 0}), jobs.CodeBadRequest)
		refused(t, call(t, cs, tool, map[string]any{"limit": 501}), jobs.CodeBadRequest)
		refused(t, call(t, cs, tool, map[string]any{"before": "garbage"}), jobs.CodeBadRequest)
		refused(t, call(t, cs, tool, map[string]any{"before": "zz", "limit": 2}), jobs.CodeBadRequest)
		ok(t, call(t, cs, tool, map[string]any{"limit": nil}), &page)
		ok(t, call(t, cs, tool, map[string]any{"before": o.Suspended, "limit": 500}), &page)
	}
	refused(t, call(t, cs, mcp.ToolBackfills, map[string]any{"limit": 0}), jobs.CodeBadRequest)
	refused(t, call(t, cs, mcp.ToolListRuns, map[string]any{"created_from": "yesterday"}), jobs.CodeBadRequest)
	refused(t, call(t, cs, mcp.ToolListRuns, map[string]any{"job": "a\x00b"}), jobs.CodeBadRequest)
	refused(t, call(t, cs, mcp.ToolBackfills, map[string]any{"status": "odd"}), jobs.CodeBadRequest)
	refused(t, call(t, cs, mcp.ToolHistory, map[string]any{"run_id": ""}), jobs.CodeBadRequest)

	// Actions.
	refused(t, call(t, cs, mcp.ToolCancelRun, map[string]any{"run_id": o.Completed}), jobs.CodeJobNotCancellable)
	refused(t, call(t, cs, mcp.ToolRetryRun, map[string]any{"run_id": o.Suspended}), jobs.CodeJobNotRetryable)
	refused(t, call(t, cs, mcp.ToolRetryFromStep, map[string]any{"run_id": o.Failed, "step": "refund"}), jobs.CodeStepNotFound)
	refused(t, call(t, cs, mcp.ToolRetryFromStep, map[string]any{"run_id": o.Failed}), jobs.CodeBadRequest)
	if v, _ := c.GetRun(ctx, o.Failed); v.State != store.StateFailed || len(v.Retries) != 0 {
		t.Fatalf("a refused retry changed the run: %+v", v)
	}

	var sum engine.RunSummary
	ok(t, call(t, cs, mcp.ToolCancelRun, map[string]any{"run_id": o.Suspended, "reason": "asked by the assistant"}), &sum)
	if sum.State != store.StateCancelled {
		t.Fatalf("cancel_run: %+v", sum)
	}
	if _, err := c.WaitResult(ctx, o.Suspended); jobs.CodeOf(err) != jobs.CodeRunCancelled || !strings.Contains(err.Error(), "asked by the assistant") {
		t.Fatalf("the cancel's reason is not recorded: %v", err)
	}

	o.Fixed.Store(true)
	ok(t, call(t, cs, mcp.ToolRetryFromStep, map[string]any{"run_id": o.Failed, "step": "prepare", "reason": "card fixed"}), &sum)
	out, err := client.Wait[testenv.OpsOutput](ctx, c, o.Failed)
	if err != nil || out.Greeting != "charged bob" {
		t.Fatalf("after retry_from_step: %+v %v", out, err)
	}
	if v, _ := c.GetRun(ctx, o.Failed); len(v.Retries) != 1 || v.Retries[0].FromStep != "prepare" || v.Retries[0].By == "" {
		t.Fatalf("retry_from_step is not in the trace: %+v", v.Retries)
	}

	// retry_run: a fresh dead letter, retried where it stopped.
	o.Fixed.Store(false)
	r, err := o.Flaky.Enqueue(ctx, o.Engine, testenv.OpsInput{Name: "eve"})
	if err != nil {
		t.Fatal(err)
	}
	o.Await(r.RunID, store.StateFailed)
	o.Fixed.Store(true)
	ok(t, call(t, cs, mcp.ToolRetryRun, map[string]any{"run_id": r.RunID, "by": "oncall"}), &sum)
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if out, err := client.Wait[testenv.OpsOutput](wctx, c, r.RunID); err != nil || out.Greeting != "charged eve" {
		t.Fatalf("after retry_run: %+v %v", out, err)
	}
	if v, _ := c.GetRun(ctx, r.RunID); len(v.Retries) != 1 || v.Retries[0].By != "oncall" {
		t.Fatalf("retry_run is not in the trace: %+v", v.Retries)
	}
}

// TestReadOnlyServer: a read-only server lists the read tools only, and refuses an action
// tool's call with X_FORBIDDEN, changing nothing.
func TestReadOnlyServer(t *testing.T) {
	t.Parallel()
	o := testenv.StartOps(t, testenv.Backends()[0].Open(t))
	c := client.Local(o.Engine, nil)
	cs := connectInMemory(t, mcp.NewServer(c, mcp.Options{}))
	checkViewer(t, o, c, cs)
}

func checkViewer(t *testing.T, o *testenv.Ops, c client.Client, cs *sdk.ClientSession) {
	t.Helper()
	want := slices.Clone(readTools)
	slices.Sort(want)
	if got := toolNames(t, cs); !slices.Equal(got, want) {
		t.Fatalf("a viewer's tools %v, want %v", got, want)
	}
	var page engine.RunPage
	ok(t, call(t, cs, mcp.ToolListRuns, map[string]any{}), &page)
	if len(page.Runs) != 4 {
		t.Fatalf("list_runs: %+v", page)
	}
	refused(t, call(t, cs, mcp.ToolCancelRun, map[string]any{"run_id": o.Suspended}), jobs.CodeForbidden)
	refused(t, call(t, cs, mcp.ToolRetryRun, map[string]any{"run_id": o.Failed}), jobs.CodeForbidden)
	refused(t, call(t, cs, mcp.ToolRetryFromStep, map[string]any{"run_id": o.Failed, "step": "prepare"}), jobs.CodeForbidden)
	ctx := context.Background()
	if v, _ := c.GetRun(ctx, o.Suspended); v.State != store.StateSuspended {
		t.Fatalf("a refused cancel changed the run: %s", v.State)
	}
	if v, _ := c.GetRun(ctx, o.Failed); v.State != store.StateFailed || len(v.Retries) != 0 {
		t.Fatalf("a refused retry changed the run: %+v", v)
	}
}
