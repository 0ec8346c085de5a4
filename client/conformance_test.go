package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/client"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/scheduler"
	"github.com/ultimat3/jobs/store"
)

// side is one implementation of the operator's API over the fixture's engine.
type side struct {
	name string
	c    client.Client
}

// sides returns the in-process client and the HTTP client of a real server over the same
// engine and scheduler.
func sides(t *testing.T, o *testenv.Ops) []side {
	t.Helper()
	sc, err := scheduler.New(scheduler.Config{Engine: o.Engine, Logger: o.Logger,
		Schedules: scheduler.Static(scheduler.MustDefine("nightly", o.Greet, "0 3 * * *", "UTC", testenv.OpsInput{Name: "night"}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sc.Stop(context.Background()) })
	srv, err := api.NewServer(api.Config{Engine: o.Engine, Scheduler: sc, Logger: o.Logger, Addr: "127.0.0.1:0", NoUI: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Stop(ctx)
	})
	hc, err := api.NewClient("http://"+srv.Addr(), "", api.WithTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hc.Close)
	return []side{{"local", client.Local(o.Engine, sc)}, {"http", hc}}
}

func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// same calls read on each side and fails unless both answer the same JSON (or the same code).
func same[T any](t *testing.T, ss []side, what string, read func(client.Client) (T, error)) T {
	t.Helper()
	var first string
	var out T
	for i, s := range ss {
		v, err := read(s.c)
		got := asJSON(t, v)
		if err != nil {
			got = "error " + string(jobs.CodeOf(err))
			if jobs.CodeOf(err) == "" {
				t.Fatalf("%s on %s: an error without a code: %v", what, s.name, err)
			}
		}
		if i == 0 {
			first, out = got, v
		} else if got != first {
			t.Fatalf("%s: %s answers\n%s\nbut %s answers\n%s", what, ss[0].name, first, s.name, got)
		}
	}
	return out
}

func wantCode(t *testing.T, what string, err error, code jobs.Code) {
	t.Helper()
	if jobs.CodeOf(err) != code {
		t.Fatalf("%s: got %v, want %s", what, err, code)
	}
}

// TestOneClientAPI runs the same questions and actions against client.Local and *api.Client
// over a real server, on every backend: the same answers, the same refusals.
func TestOneClientAPI(t *testing.T) {
	t.Parallel()
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			o := testenv.StartOps(t, b.Open(t))
			ss := sides(t, o)
			ctx := context.Background()

			// Reads: one answer, whichever side is asked.
			for _, id := range []string{o.Completed, o.Failed, o.Suspended, o.Cancelled} {
				v := same(t, ss, "GetRun "+id, func(c client.Client) (engine.RunView, error) { return c.GetRun(ctx, id) })
				if v.ID != id {
					t.Fatalf("GetRun(%s) = %+v", id, v)
				}
			}
			all := same(t, ss, "ListRuns", func(c client.Client) (engine.RunPage, error) { return c.ListRuns(ctx, store.ListParams{}) })
			if len(all.Runs) != 4 {
				t.Fatalf("ListRuns = %d runs, want 4", len(all.Runs))
			}
			p1 := same(t, ss, "ListRuns page 1", func(c client.Client) (engine.RunPage, error) {
				return c.ListRuns(ctx, store.ListParams{Limit: 3})
			})
			p2 := same(t, ss, "ListRuns page 2", func(c client.Client) (engine.RunPage, error) {
				return c.ListRuns(ctx, store.ListParams{Limit: 3, Before: p1.Next})
			})
			if len(p1.Runs) != 3 || p1.Next == "" || len(p2.Runs) != 1 || p2.Next != "" {
				t.Fatalf("pages: %d runs next %q, then %d next %q", len(p1.Runs), p1.Next, len(p2.Runs), p2.Next)
			}
			same(t, ss, "ListRuns by state", func(c client.Client) (engine.RunPage, error) {
				return c.ListRuns(ctx, store.ListParams{State: store.StateSuspended})
			})
			search := same(t, ss, "SearchRuns by key", func(c client.Client) (engine.RunPage, error) {
				return c.SearchRuns(ctx, engine.RunFilter{Search: "cy"})
			})
			if len(search.Runs) != 1 || search.Runs[0].ID != o.Suspended {
				t.Fatalf("SearchRuns(cy) = %+v", search)
			}
			dead := same(t, ss, "DeadLetters", func(c client.Client) (engine.RunPage, error) {
				return c.DeadLetters(ctx, store.ListParams{Queue: "payments"})
			})
			if len(dead.Runs) != 1 || dead.Runs[0].ID != o.Failed || dead.Runs[0].Error == "" {
				t.Fatalf("DeadLetters = %+v", dead)
			}
			qs := same(t, ss, "Queues", func(c client.Client) ([]engine.QueueView, error) { return c.Queues(ctx) })
			if len(qs) != 2 {
				t.Fatalf("Queues = %+v", qs)
			}
			ov := same(t, ss, "Overview totals", func(c client.Client) (map[string]int, error) {
				ov, err := c.Overview(ctx, time.Hour, 10*time.Minute)
				return ov.Totals, err
			})
			if ov["completed"] != 1 || ov["failed"] != 1 {
				t.Fatalf("Overview totals = %v", ov)
			}
			m := same(t, ss, "Manifest", func(c client.Client) (engine.ManifestView, error) { return c.Manifest(ctx, "") })
			if len(m.Declarations) < 3 || len(m.Workers) != 1 {
				t.Fatalf("Manifest = %+v", m)
			}
			same(t, ss, "Manifest of jobs", func(c client.Client) (engine.ManifestView, error) { return c.Manifest(ctx, "job") })
			same(t, ss, "Backfills", func(c client.Client) (int, error) {
				bs, err := c.Backfills(ctx, store.BackfillFilter{})
				return len(bs), err
			})
			scheds := same(t, ss, "Schedules", func(c client.Client) (int, error) {
				s, err := c.Schedules(ctx)
				return len(s), err
			})
			if scheds != 1 {
				t.Fatalf("Schedules = %d, want 1", scheds)
			}
			same(t, ss, "Schedule", func(c client.Client) (string, error) {
				s, err := c.Schedule(ctx, "nightly")
				return s.Name + " " + s.Job, err
			})
			dump := same(t, ss, "DumpHistory", func(c client.Client) (string, error) {
				var buf bytes.Buffer
				err := c.DumpHistory(ctx, o.Completed, &buf)
				return buf.String(), err
			})
			evs, err := history.Load(strings.NewReader(dump))
			if err != nil || len(evs) < 3 || evs[0].Kind != history.KindRunStarted {
				t.Fatalf("the dump does not load: %v %+v", err, evs)
			}
			res := same(t, ss, "WaitResult of a completed run", func(c client.Client) (engine.RunResult, error) {
				return c.WaitResult(ctx, o.Completed)
			})
			var got testenv.OpsOutput
			if err := res.Decode(&got); err != nil || got.Greeting != "hi ada" {
				t.Fatalf("result %+v: %v", got, err)
			}

			// Refusals: the same code on both sides, nothing changed.
			same(t, ss, "GetRun unknown", func(c client.Client) (engine.RunView, error) {
				return c.GetRun(ctx, "00000000-0000-7000-8000-000000000001")
			})
			for what, call := range map[string]func(client.Client) error{
				"bad state":     func(c client.Client) error { _, err := c.ListRuns(ctx, store.ListParams{State: "lost"}); return err },
				"limit too big": func(c client.Client) error { _, err := c.ListRuns(ctx, store.ListParams{Limit: 501}); return err },
				"NUL in job":    func(c client.Client) error { _, err := c.ListRuns(ctx, store.ListParams{Job: "a\x00b"}); return err },
				"bad cursor":    func(c client.Client) error { _, err := c.ListRuns(ctx, store.ListParams{Before: "zz"}); return err },
				"bad search cursor": func(c client.Client) error {
					_, err := c.SearchRuns(ctx, engine.RunFilter{Before: "garbage"})
					return err
				},
				"bad backfill": func(c client.Client) error {
					_, err := c.Backfills(ctx, store.BackfillFilter{Status: "odd"})
					return err
				},
				"bad reason":     func(c client.Client) error { _, err := c.Cancel(ctx, o.Suspended, "\xff"); return err },
				"empty enqueue":  func(c client.Client) error { _, err := c.Enqueue(ctx, jobs.EnqueueRequest{}); return err },
				"bad event name": func(c client.Client) error { _, err := c.Publish(ctx, "a\x00", 1); return err },
			} {
				for _, s := range ss {
					wantCode(t, what+" on "+s.name, call(s.c), jobs.CodeBadRequest)
				}
			}
			same(t, ss, "cancel a finished run", func(c client.Client) (engine.RunSummary, error) {
				return c.Cancel(ctx, o.Completed, "too late")
			})
			same(t, ss, "retry a completed run", func(c client.Client) (engine.RunSummary, error) {
				return c.Retry(ctx, engine.RetryRequest{RunID: o.Completed})
			})
			same(t, ss, "retry from a step the run never ran", func(c client.Client) (engine.RunSummary, error) {
				return c.Retry(ctx, engine.RetryRequest{RunID: o.Failed, FromStep: "refund"})
			})
			same(t, ss, "unknown schedule", func(c client.Client) (scheduler.Info, error) { return c.Schedule(ctx, "weekly") })
			for _, s := range ss {
				short, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
				_, err := s.c.WaitResult(short, o.Suspended)
				cancel()
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("WaitResult of a suspended run on %s, ctx ending: %v", s.name, err)
				}
			}
			if v, _ := ss[0].c.GetRun(ctx, o.Suspended); v.State != store.StateSuspended {
				t.Fatalf("a refused cancel changed the run: %s", v.State)
			}
			res = same(t, ss, "WaitResult of a cancelled run", func(c client.Client) (engine.RunResult, error) {
				return c.WaitResult(ctx, o.Cancelled)
			})
			if res.State != store.StateCancelled || res.Error == nil || res.Error.Code != jobs.CodeRunCancelled ||
				!strings.Contains(res.Error.Message, "no longer needed") {
				t.Fatalf("WaitResult of a cancelled run = %+v", res)
			}
			res = same(t, ss, "WaitResult of a failed run", func(c client.Client) (engine.RunResult, error) {
				return c.WaitResult(ctx, o.Failed)
			})
			if res.Error == nil || !strings.Contains(res.Error.Message, "card declined") {
				t.Fatalf("WaitResult of a failed run = %+v", res)
			}

			// Actions, each side on its own runs.
			flaky := map[string]string{}
			for _, s := range ss {
				r, err := s.c.Enqueue(ctx, jobs.EnqueueRequest{Job: "ops-flaky", Key: s.name + "-f", NoTenant: true,
					Input: mustEncode(t, testenv.OpsInput{Name: s.name + "-f"})})
				if err != nil {
					t.Fatal(err)
				}
				flaky[s.name] = r.RunID
				if _, err := s.c.WaitResult(ctx, r.RunID); err == nil {
					t.Fatalf("%s: the flaky run completed before it was fixed", s.name)
				}
			}
			o.Fixed.Store(true)
			for _, s := range ss {
				// A run that waits: started by the side, finished by its event, awaited by Wait.
				r, err := s.c.Enqueue(ctx, jobs.EnqueueRequest{Job: "ops-waiter", Key: s.name + "-w", NoTenant: true,
					Input: mustEncode(t, testenv.OpsInput{Name: s.name + "-w"})})
				if err != nil {
					t.Fatal(err)
				}
				o.Await(r.RunID, store.StateSuspended)
				if _, err := s.c.Publish(ctx, "approved", map[string]string{"name": s.name + "-w", "greeting": "ok " + s.name}); err != nil {
					t.Fatal(err)
				}
				out, err := client.Wait[testenv.OpsOutput](ctx, s.c, r.RunID)
				if err != nil || out.Greeting != "ok "+s.name {
					t.Fatalf("%s: Wait = %+v, %v", s.name, out, err)
				}

				// Cancel one: its wait ends with X_RUN_CANCELLED.
				r, err = s.c.Enqueue(ctx, jobs.EnqueueRequest{Job: "ops-waiter", Key: s.name + "-c", NoTenant: true,
					Input: mustEncode(t, testenv.OpsInput{Name: s.name + "-c"})})
				if err != nil {
					t.Fatal(err)
				}
				sum, err := s.c.Cancel(ctx, r.RunID, "by "+s.name)
				if err != nil || sum.State != store.StateCancelled {
					t.Fatalf("%s: Cancel = %+v, %v", s.name, sum, err)
				}
				_, err = client.Wait[testenv.OpsOutput](ctx, s.c, r.RunID)
				wantCode(t, s.name+": Wait of a cancelled run", err, jobs.CodeRunCancelled)

				// Retry the dead letter from its failing step: it completes, with the who and why.
				sum, err = s.c.Retry(ctx, engine.RetryRequest{RunID: flaky[s.name], FromStep: "prepare", By: "ops", Reason: "card fixed"})
				if err != nil || sum.State != store.StateReady {
					t.Fatalf("%s: Retry = %+v, %v", s.name, sum, err)
				}
				out, err = client.Wait[testenv.OpsOutput](ctx, s.c, flaky[s.name])
				if err != nil || out.Greeting != "charged "+s.name+"-f" {
					t.Fatalf("%s: Wait after retry = %+v, %v", s.name, out, err)
				}
				v, err := s.c.GetRun(ctx, flaky[s.name])
				if err != nil || len(v.Retries) != 1 || v.Retries[0].FromStep != "prepare" || v.Retries[0].Reason != "card fixed" {
					t.Fatalf("%s: the retry is not in the trace: %+v %v", s.name, v.Retries, err)
				}

				// Schedules: pause, resume, trigger.
				info, err := s.c.PauseSchedule(ctx, "nightly")
				if err != nil || !info.Paused {
					t.Fatalf("%s: PauseSchedule = %+v, %v", s.name, info, err)
				}
				if info, err = s.c.ResumeSchedule(ctx, "nightly"); err != nil || info.Paused {
					t.Fatalf("%s: ResumeSchedule = %+v, %v", s.name, info, err)
				}
			}
		})
	}
}

func mustEncode(t *testing.T, v any) []byte {
	t.Helper()
	b, err := jobs.Encode(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
