package client_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/client"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
)

// TestOneMistakeOneCode sends the same bad input through client.Local and *api.Client over a
// real server and requires the same answer from each: the same X_ code (where the rule is the
// client's own, the code it names), or success on both. Nothing here may succeed on one side
// and be refused on the other, or be refused for a different reason.
func TestOneMistakeOneCode(t *testing.T) {
	t.Parallel()
	o := testenv.StartOps(t, testenv.Backends()[0].Open(t))
	ss := sides(t, o)
	ctx := context.Background()

	const unknown = "00000000-0000-7000-8000-000000000001"
	long := strings.Repeat("r", jobs.MaxIdentifier+1)
	type call struct {
		name string
		want jobs.Code // "" asks only that both sides agree
		do   func(client.Client) error
	}
	var calls []call
	add := func(name string, want jobs.Code, do func(client.Client) error) {
		calls = append(calls, call{name, want, do})
	}

	// Every method taking a run id or a schedule name, with every bad id.
	byID := map[string]func(client.Client, string) error{
		"GetRun":      func(c client.Client, id string) error { _, err := c.GetRun(ctx, id); return err },
		"DumpHistory": func(c client.Client, id string) error { return c.DumpHistory(ctx, id, &bytes.Buffer{}) },
		"WaitResult": func(c client.Client, id string) error {
			short, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			_, err := c.WaitResult(short, id)
			return err
		},
		"Cancel": func(c client.Client, id string) error { _, err := c.Cancel(ctx, id, "why"); return err },
		"Retry": func(c client.Client, id string) error {
			_, err := c.Retry(ctx, engine.RetryRequest{RunID: id})
			return err
		},
		"Schedule":        func(c client.Client, n string) error { _, err := c.Schedule(ctx, n); return err },
		"PauseSchedule":   func(c client.Client, n string) error { _, err := c.PauseSchedule(ctx, n); return err },
		"ResumeSchedule":  func(c client.Client, n string) error { _, err := c.ResumeSchedule(ctx, n); return err },
		"TriggerSchedule": func(c client.Client, n string) error { _, err := c.TriggerSchedule(ctx, n); return err },
	}
	for method, do := range byID {
		for _, id := range []struct {
			name, v string
			want    jobs.Code
		}{
			{"empty", "", jobs.CodeBadRequest},
			{"NUL", "a\x00b", jobs.CodeBadRequest},
			{"over 1,000 bytes", long, jobs.CodeBadRequest},
			{"invalid UTF-8", "\xff\xfe", jobs.CodeBadRequest},
			{"a slash", "a/b", ""},
			{"only a slash", "/", jobs.CodeBadRequest},
			{"dot", ".", ""},
			{"dot dot", "..", ""},
			{"a path up", "../x", ""},
			{"a query", "x?state=failed", ""},
			{"a space", " ", ""},
			{"unknown", unknown, ""},
		} {
			add(method+" of "+id.name, id.want, func(c client.Client) error { return do(c, id.v) })
		}
	}

	// Durations and limits.
	overview := func(window, bucket time.Duration) func(client.Client) error {
		return func(c client.Client) error { _, err := c.Overview(ctx, window, bucket); return err }
	}
	add("Overview of a negative window", jobs.CodeBadRequest, overview(-time.Hour, 0))
	add("Overview of a negative bucket", jobs.CodeBadRequest, overview(0, -time.Minute))
	add("Overview of both negative", jobs.CodeBadRequest, overview(-time.Hour, -time.Minute))
	add("Overview of the minimum duration", jobs.CodeBadRequest, overview(time.Duration(-1<<63), 0))
	add("Overview of zeros", "", overview(0, 0))
	add("Overview of a bucket wider than the window", "", overview(time.Minute, time.Hour))
	add("Overview of a nanosecond bucket", "", overview(time.Hour, time.Nanosecond))
	add("Overview of a huge window", "", overview(1<<62, 0))

	list := func(p store.ListParams) func(client.Client) error {
		return func(c client.Client) error { _, err := c.ListRuns(ctx, p); return err }
	}
	dead := func(p store.ListParams) func(client.Client) error {
		return func(c client.Client) error { _, err := c.DeadLetters(ctx, p); return err }
	}
	search := func(f engine.RunFilter) func(client.Client) error {
		return func(c client.Client) error { _, err := c.SearchRuns(ctx, f); return err }
	}
	add("ListRuns of a negative limit", "", list(store.ListParams{Limit: -1}))
	add("ListRuns of a limit too big", jobs.CodeBadRequest, list(store.ListParams{Limit: 501}))
	add("ListRuns of an unknown state", jobs.CodeBadRequest, list(store.ListParams{State: "lost"}))
	add("ListRuns of a state with a NUL", jobs.CodeBadRequest, list(store.ListParams{State: "ready\x00"}))
	add("ListRuns of garbage cursor", jobs.CodeBadRequest, list(store.ListParams{Before: "zz"}))
	add("ListRuns of an uppercase cursor", "", list(store.ListParams{Before: strings.ToUpper(unknown)}))
	add("ListRuns of a NUL queue", jobs.CodeBadRequest, list(store.ListParams{Queue: "q\x00"}))
	add("ListRuns of an invalid UTF-8 job", jobs.CodeBadRequest, list(store.ListParams{Job: "\xff"}))
	add("ListRuns of a long tenant", "", list(store.ListParams{Tenant: long}))
	add("DeadLetters of a negative limit", "", dead(store.ListParams{Limit: -5}))
	add("DeadLetters of a limit too big", jobs.CodeBadRequest, dead(store.ListParams{Limit: 1 << 20}))
	add("DeadLetters of garbage cursor", jobs.CodeBadRequest, dead(store.ListParams{Before: "garbage"}))
	add("DeadLetters of a NUL job", jobs.CodeBadRequest, dead(store.ListParams{Job: "a\x00"}))
	add("DeadLetters of an unknown state (ignored)", "", dead(store.ListParams{State: "lost"}))
	add("SearchRuns of a negative limit", "", search(engine.RunFilter{Limit: -1}))
	add("SearchRuns of a limit too big", jobs.CodeBadRequest, search(engine.RunFilter{Limit: 501}))
	add("SearchRuns of an unknown state", jobs.CodeBadRequest, search(engine.RunFilter{State: "lost"}))
	add("SearchRuns of garbage cursor", jobs.CodeBadRequest, search(engine.RunFilter{Before: "garbage"}))
	add("SearchRuns of a NUL search", jobs.CodeBadRequest, search(engine.RunFilter{Search: "a\x00"}))
	add("SearchRuns of an invalid UTF-8 search", jobs.CodeBadRequest, search(engine.RunFilter{Search: "\xff"}))
	add("SearchRuns of a long search", "", search(engine.RunFilter{Search: long}))
	add("SearchRuns of a NUL tenant", jobs.CodeBadRequest, search(engine.RunFilter{Tenant: "\x00"}))
	add("SearchRuns of times reversed", "", search(engine.RunFilter{CreatedFrom: time.Now(), CreatedTo: time.Now().Add(-time.Hour)}))
	add("SearchRuns from year 1", "", search(engine.RunFilter{CreatedFrom: time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC)}))

	// Text fields of the other reads.
	manifest := func(kind string) func(client.Client) error {
		return func(c client.Client) error { _, err := c.Manifest(ctx, kind); return err }
	}
	add("Manifest of a NUL kind", jobs.CodeBadRequest, manifest("job\x00"))
	add("Manifest of an invalid UTF-8 kind", jobs.CodeBadRequest, manifest("\xff"))
	add("Manifest of a long kind", "", manifest(long))
	add("Manifest of an unknown kind", "", manifest("nope"))
	backfills := func(f store.BackfillFilter) func(client.Client) error {
		return func(c client.Client) error { _, err := c.Backfills(ctx, f); return err }
	}
	add("Backfills of an unknown status", jobs.CodeBadRequest, backfills(store.BackfillFilter{Status: "odd"}))
	add("Backfills of a NUL name", jobs.CodeBadRequest, backfills(store.BackfillFilter{Name: "a\x00"}))
	add("Backfills of an invalid UTF-8 run", jobs.CodeBadRequest, backfills(store.BackfillFilter{RunID: "\xff"}))
	add("Backfills of a long tenant", "", backfills(store.BackfillFilter{Tenant: long}))
	add("Backfills of a negative limit", "", backfills(store.BackfillFilter{Limit: -1}))
	add("Backfills of a limit too big", jobs.CodeBadRequest, backfills(store.BackfillFilter{Limit: 10_001}))

	// Actions.
	enqueue := func(req jobs.EnqueueRequest) func(client.Client) error {
		return func(c client.Client) error { _, err := c.Enqueue(ctx, req); return err }
	}
	ok := jobs.EnqueueRequest{Job: "ops-greet", Key: "parity", NoTenant: true, Input: mustEncode(t, testenv.OpsInput{Name: "p"})}
	with := func(f func(*jobs.EnqueueRequest)) jobs.EnqueueRequest { r := ok; f(&r); return r }
	add("Enqueue of nothing", jobs.CodeBadRequest, enqueue(jobs.EnqueueRequest{}))
	add("Enqueue of no key", "", enqueue(with(func(r *jobs.EnqueueRequest) { r.Key = "" })))
	add("Enqueue of no tenant", "", enqueue(with(func(r *jobs.EnqueueRequest) { r.NoTenant = false })))
	add("Enqueue of a NUL job", jobs.CodeBadRequest, enqueue(with(func(r *jobs.EnqueueRequest) { r.Job = "a\x00" })))
	add("Enqueue of an invalid UTF-8 key", jobs.CodeBadRequest, enqueue(with(func(r *jobs.EnqueueRequest) { r.Key = "\xff" })))
	add("Enqueue of a long queue", jobs.CodeBadRequest, enqueue(with(func(r *jobs.EnqueueRequest) { r.Queue = long })))
	add("Enqueue of a NUL tenant", jobs.CodeBadRequest, enqueue(with(func(r *jobs.EnqueueRequest) { r.NoTenant, r.Tenant = false, "t\x00" })))
	add("Enqueue of a tenant and no tenant", jobs.CodeBadRequest, enqueue(with(func(r *jobs.EnqueueRequest) { r.Tenant = "t" })))
	add("Enqueue of a bad enqueuedBy", jobs.CodeBadRequest, enqueue(with(func(r *jobs.EnqueueRequest) { r.EnqueuedBy = "\xff" })))
	add("Enqueue of a NUL dedupe id", jobs.CodeBadRequest, enqueue(with(func(r *jobs.EnqueueRequest) { r.DedupeID = "\x00" })))
	add("Enqueue of a negative delay", jobs.CodeBadRequest, enqueue(with(func(r *jobs.EnqueueRequest) { r.Delay = -time.Second })))
	add("Enqueue of a delay past the horizon", jobs.CodeBadRequest, enqueue(with(func(r *jobs.EnqueueRequest) { r.Delay = 1 << 62 })))
	add("Enqueue of a priority out of range", jobs.CodeBadRequest, enqueue(with(func(r *jobs.EnqueueRequest) { r.Priority = 1 << 20 })))
	add("Enqueue of input that is not msgpack", "", enqueue(with(func(r *jobs.EnqueueRequest) { r.Input = []byte{0xc1} })))
	add("Enqueue of a bad traceparent", "", enqueue(with(func(r *jobs.EnqueueRequest) { r.TraceParent = "\xff" })))
	publish := func(name string, payload any) func(client.Client) error {
		return func(c client.Client) error { _, err := c.Publish(ctx, name, payload); return err }
	}
	add("Publish of no name", "", publish("", 1))
	add("Publish of a NUL name", jobs.CodeBadRequest, publish("a\x00", 1))
	add("Publish of an invalid UTF-8 name", jobs.CodeBadRequest, publish("\xff", 1))
	add("Publish of a long name", "", publish(long, 1))
	add("Publish of a payload that does not encode", "", publish("parity", make(chan int)))
	add("Publish of an invalid UTF-8 field", "", publish("parity", map[string]string{"name": "\xff"}))
	add("Cancel of an invalid UTF-8 reason", jobs.CodeBadRequest, func(c client.Client) error { _, err := c.Cancel(ctx, o.Suspended, "\xff"); return err })
	add("Cancel of a NUL reason", jobs.CodeBadRequest, func(c client.Client) error { _, err := c.Cancel(ctx, o.Suspended, "\x00"); return err })
	add("Cancel of a long reason", "", func(c client.Client) error { _, err := c.Cancel(ctx, o.Suspended, long); return err })
	retry := func(req engine.RetryRequest) func(client.Client) error {
		return func(c client.Client) error { _, err := c.Retry(ctx, req); return err }
	}
	add("Retry of a NUL step", jobs.CodeBadRequest, retry(engine.RetryRequest{RunID: o.Failed, FromStep: "a\x00"}))
	add("Retry of a long by", "", retry(engine.RetryRequest{RunID: o.Failed, By: long}))
	add("Retry of an invalid UTF-8 reason", jobs.CodeBadRequest, retry(engine.RetryRequest{RunID: o.Failed, Reason: "\xff"}))
	add("Retry of a bad step of an unknown run", "", retry(engine.RetryRequest{RunID: unknown, FromStep: "\xff"}))

	for _, tc := range calls {
		var codes []jobs.Code
		for _, s := range ss {
			err := tc.do(s.c)
			code := jobs.CodeOf(err)
			if err != nil && code == "" {
				t.Errorf("%s on %s: an error without a code: %v", tc.name, s.name, err)
			}
			if tc.want != "" && code != tc.want {
				t.Errorf("%s on %s: %.200v, want %s", tc.name, s.name, err, tc.want)
			}
			codes = append(codes, code)
		}
		if codes[0] != codes[1] {
			t.Errorf("%s: %s answers %q but %s answers %q", tc.name, ss[0].name, codes[0], ss[1].name, codes[1])
		}
	}

	// Nothing the bad input asked for happened: the runs are as the fixture left them.
	for id, want := range map[string]store.State{o.Suspended: store.StateSuspended, o.Failed: store.StateFailed} {
		if v, err := ss[0].c.GetRun(ctx, id); err != nil || v.State != want {
			t.Fatalf("run %s is %s (%v), want %s", id, v.State, err, want)
		}
	}
}
