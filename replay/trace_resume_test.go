package replay_test

import (
	"context"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/replay"
)

// tracedRecorder answers sleeps, enqueues and steps as an engine would, and keeps each record's
// commands with the span its context carried.
type tracedRecorder struct {
	mu      sync.Mutex
	seq     int64
	records []tracedRecord
}

type tracedRecord struct {
	span trace.SpanContext
	cmds []frontend.Command
}

func (r *tracedRecorder) Record(ctx context.Context, cmds []frontend.Command) (frontend.RecordResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, tracedRecord{span: trace.SpanContextFromContext(ctx), cmds: append([]frontend.Command(nil), cmds...)})
	var resp frontend.RecordResponse
	for _, c := range cmds {
		var p history.Payload
		switch c.Kind {
		case frontend.CmdSleep:
			p = history.TimerStarted{TimerName: c.Name, WakeAt: c.WakeAt}
		case frontend.CmdEnqueue:
			p = history.ChildEnqueued{CallName: c.Name, Job: c.Effect.Job, Key: c.Effect.Key, RunID: "child-" + c.Name, Child: c.Effect.Child}
		default:
			p = history.StepCompleted{StepName: c.Name, Output: c.Output, Parallel: c.Parallel}
		}
		r.seq++
		ev := history.New(time.Now(), p)
		ev.Seq = r.seq
		resp.Appended = append(resp.Appended, ev)
	}
	resp.LastSeq = r.seq
	return resp, nil
}

func (r *tracedRecorder) all() []tracedRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]tracedRecord(nil), r.records...)
}

// A body parked on a sleep and resumed on a later claim keeps its first context, whose span is
// the first claim's (ended by then). What it does after the resume reaches the engine under the
// current claim's span: a child it starts carries that span as its trace context (else the
// engine stamps the child from the record's context), and each record's context carries it
// (over HTTP it is the record's trace header).
func TestAResumedBodyRecordsUnderTheCurrentClaimsSpan(t *testing.T) {
	t.Parallel()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tracer := tp.Tracer("test")

	kid := jobs.MustDefine("kid", func(s string) string { return s }, jobs.NoTenant[string](),
		func(c *jobs.Ctx, s string) (string, error) { return s, nil })
	def := jobs.MustDefine("napper", func(s string) string { return s }, jobs.NoTenant[string](),
		func(c *jobs.Ctx, _ string) (string, error) {
			if err := jobs.Sleep(c, "nap", time.Minute); err != nil {
				return "", err
			}
			r, err := kid.StartChild(c, "kid", "k1")
			if err != nil {
				return "", err
			}
			return r.RunID, nil
		})

	input, _ := jobs.Encode("x")
	started := history.New(time.Now(), history.RunStarted{Job: "napper", Queue: jobs.DefaultQueue, Input: input, Key: "x", NoTenant: true})
	started.Seq = 1
	info := jobs.RunInfo{RunID: "r", Job: "napper", Attempt: 1}

	ctx1, first := tracer.Start(t.Context(), "jobs.attempt napper")
	rec1 := &tracedRecorder{seq: 1}
	ex, out, err := replay.Start(ctx1, replay.Config{Def: def, Info: info, Recorder: rec1, Park: true}, []history.Event{started})
	if err != nil {
		t.Fatal(err)
	}
	if o := <-out; o.Kind != replay.Suspended || !o.Parked {
		t.Fatalf("first claim: %v (parked %v) %v, want a parked suspension", o.Kind, o.Parked, o.Err)
	}
	first.End()
	t.Cleanup(func() {
		select {
		case <-ex.Exited():
		default:
			ex.Evict()
		}
	})

	_, second := tracer.Start(t.Context(), "jobs.attempt napper")
	defer second.End()
	fired := history.New(time.Now(), history.TimerFired{TimerName: "nap"})
	fired.Seq = ex.LastSeq() + 1
	rec2 := &tracedRecorder{seq: fired.Seq}
	out2, ok := ex.Resume([]history.Event{fired}, rec2, info, second)
	if !ok {
		t.Fatal("the parked body was not resumed")
	}
	if o := <-out2; o.Kind != replay.Completed {
		t.Fatalf("second claim: %v %v, want completed", o.Kind, o.Err)
	}

	records := rec2.all()
	if len(records) != 1 || len(records[0].cmds) != 1 || records[0].cmds[0].Kind != frontend.CmdEnqueue {
		t.Fatalf("the second claim's records: %+v; want the child's start alone", records)
	}
	want := second.SpanContext()
	wantParent, _ := jobs.TraceContext(trace.ContextWithSpan(context.Background(), second))
	firstParent, _ := jobs.TraceContext(ctx1)
	if got := records[0].cmds[0].Effect.TraceParent; got != wantParent {
		which := "no trace context"
		if got == firstParent {
			which = "the FIRST claim's span (ended before the wake-up)"
		}
		t.Errorf("the child's start carries traceparent %q (%s), want the current claim's %q", got, which, wantParent)
	}
	if got := records[0].span; got.SpanID() != want.SpanID() {
		which := "another span"
		if got.SpanID() == first.SpanContext().SpanID() {
			which = "the FIRST claim's span (ended before the wake-up)"
		}
		t.Errorf("the record after the resume went under span %s (%s), want the current claim's %s", got.SpanID(), which, want.SpanID())
	}
	// Before the resume, the records went under the first claim's span.
	if r := rec1.all(); len(r) != 1 || r[0].span.SpanID() != first.SpanContext().SpanID() {
		t.Errorf("the first claim's records: %+v, want the sleep under the first claim's span", r)
	}
}

// A worker with no tracer installed still hands in a span for a run enqueued under a trace:
// the global provider's non-recording span, carrying the run's stored trace context, on each
// claim. Resuming under it works as untraced: the records keep that context, and nothing
// compares the spans themselves (a non-recording span is a struct holding a trace state, which
// == cannot compare: it panicked).
func TestAResumeUnderANonRecordingSpan(t *testing.T) {
	t.Parallel()
	def := jobs.MustDefine("napper2", func(s string) string { return s }, jobs.NoTenant[string](),
		func(c *jobs.Ctx, _ string) (int, error) {
			if err := jobs.Sleep(c, "nap", time.Minute); err != nil {
				return 0, err
			}
			return jobs.Step(c, "after", func(context.Context) (int, error) { return 1, nil })
		})
	input, _ := jobs.Encode("x")
	started := history.New(time.Now(), history.RunStarted{Job: "napper2", Queue: jobs.DefaultQueue, Input: input, Key: "x", NoTenant: true})
	started.Seq = 1
	info := jobs.RunInfo{RunID: "r", Job: "napper2", Attempt: 1}
	const stored = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	claimSpan := func() trace.Span { // what the global provider's tracer starts under the stored context
		return trace.SpanFromContext(jobs.ContextWithTrace(context.Background(), stored, "vendor=x"))
	}
	rec1 := &tracedRecorder{seq: 1}
	ex, out, err := replay.Start(trace.ContextWithSpan(t.Context(), claimSpan()), replay.Config{Def: def, Info: info, Recorder: rec1, Park: true}, []history.Event{started})
	if err != nil {
		t.Fatal(err)
	}
	if o := <-out; o.Kind != replay.Suspended || !o.Parked {
		t.Fatalf("first claim: %v (parked %v) %v, want a parked suspension", o.Kind, o.Parked, o.Err)
	}
	fired := history.New(time.Now(), history.TimerFired{TimerName: "nap"})
	fired.Seq = ex.LastSeq() + 1
	rec2 := &tracedRecorder{seq: fired.Seq}
	out2, ok := ex.Resume([]history.Event{fired}, rec2, info, claimSpan())
	if !ok {
		t.Fatal("the parked body was not resumed")
	}
	if o := <-out2; o.Kind != replay.Completed {
		t.Fatalf("second claim: %v %v, want completed", o.Kind, o.Err)
	}
	want := claimSpan().SpanContext()
	for _, r := range rec2.all() {
		if !r.span.Equal(want) {
			t.Errorf("a record after the resume went under %v, want the stored trace context %v", r.span, want)
		}
	}
}
