package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// retentionEnv is an engine over st with retention rc on a fake clock.
func retentionEnv(t *testing.T, st store.Store, rc engine.RetentionConfig) *testenv.Env {
	t.Helper()
	fake := clock.NewFake(time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC))
	eng, err := engine.New(engine.Config{Store: st, Clock: fake, AllowUndeclared: true, Retention: rc,
		PollFallback: 50 * time.Millisecond, Logger: testenv.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = eng.Stop(ctx)
	})
	return &testenv.Env{T: t, Store: st, Clock: fake, Engine: eng, Logger: testenv.Logger()}
}

var (
	okJob = jobs.MustDefine("ok", func(s string) string { return s }, jobs.NoTenant[string](),
		func(_ *jobs.Ctx, s string) (string, error) { return "done " + s, nil }, jobs.Queue("ret"))
	badJob = jobs.MustDefine("bad", func(s string) string { return s }, jobs.NoTenant[string](),
		func(_ *jobs.Ctx, s string) (string, error) { return "", errors.New("boom") }, jobs.Queue("ret"),
		jobs.Retry(jobs.RetryPolicy{Attempts: 1}))
)

func enqueueIn(t *testing.T, env *testenv.Env, job, key string) string {
	t.Helper()
	in, err := jobs.Encode(key)
	if err != nil {
		t.Fatal(err)
	}
	res, err := env.Engine.Enqueue(context.Background(), jobs.EnqueueRequest{Job: job, Queue: "ret", Key: key, NoTenant: true, Input: in})
	if err != nil {
		t.Fatal(err)
	}
	return res.RunID
}

// TestRetentionSweep: completed and cancelled runs go a week after they finished, dead letters a
// month after, live runs never; each is archived first in the dump format, which reads back as
// the history it was.
func TestRetentionSweep(t *testing.T) {
	t.Parallel()
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			archive, err := engine.DirArchive(dir)
			if err != nil {
				t.Fatal(err)
			}
			// The sweeper's own interval is out of reach: this test sweeps by hand.
			env := retentionEnv(t, b.Open(t), engine.RetentionConfig{Archive: archive, Every: 1000 * time.Hour, Batch: 2})
			ctx := context.Background()
			env.Worker(worker.Config{ID: "w1"}, okJob, badJob)
			done := []string{enqueueIn(t, env, "ok", "a"), enqueueIn(t, env, "ok", "b"), enqueueIn(t, env, "ok", "c")}
			dead := enqueueIn(t, env, "bad", "d")
			for _, id := range done {
				env.Await(id, store.StateCompleted)
			}
			env.Await(dead, store.StateFailed)
			cancelled := enqueueIn(t, env, "never", "e")
			if _, err := env.Engine.Cancel(ctx, cancelled, "test"); err != nil {
				t.Fatal(err)
			}
			live := enqueueIn(t, env, "never", "f") // no worker hosts it: ready for ever
			before := map[string][]history.Event{}
			for _, id := range done {
				before[id] = env.History(id)
			}

			env.Fake().Advance(6 * 24 * time.Hour)
			if rep, err := env.Engine.SweepRetention(ctx, false); err != nil || rep.Runs != 0 {
				t.Fatalf("after 6 days: swept %+v, %v; want nothing", rep, err)
			}
			env.Fake().Advance(2 * 24 * time.Hour)
			dry, err := env.Engine.SweepRetention(ctx, true)
			if err != nil {
				t.Fatal(err)
			}
			if dry.Runs != 4 || dry.ByState["completed"] != 3 || dry.ByState["cancelled"] != 1 || dry.FailedBefore == nil {
				t.Fatalf("dry run after 8 days: %+v; want 3 completed and 1 cancelled", dry)
			}
			for _, id := range append(slices.Clone(done), cancelled) {
				if _, err := env.Engine.GetRun(ctx, id); err != nil {
					t.Fatalf("a dry run deleted %s: %v", id, err)
				}
			}
			rep, err := env.Engine.SweepRetention(ctx, false)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Runs != 4 || rep.Archived != 4 || rep.Batches < 2 || rep.Events == 0 {
				t.Fatalf("sweep after 8 days: %+v; want 4 runs archived and deleted in batches of 2", rep)
			}
			for _, id := range append(slices.Clone(done), cancelled) {
				if _, err := env.Engine.GetRun(ctx, id); jobs.CodeOf(err) != jobs.CodeRunNotFound {
					t.Errorf("run %s after the sweep: %v, want X_RUN_NOT_FOUND", id, err)
				}
			}
			for _, id := range done {
				f, err := os.Open(filepath.Join(dir, id+".jsonl"))
				if err != nil {
					t.Fatal(err)
				}
				got, err := history.Load(f)
				f.Close()
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(got) != fmt.Sprint(before[id]) {
					t.Errorf("archive of %s:\n%v\nwant\n%v", id, got, before[id])
				}
			}
			for _, id := range []string{dead, live} {
				if _, err := env.Engine.GetRun(ctx, id); err != nil {
					t.Errorf("run %s (a dead letter or live) was deleted: %v", id, err)
				}
			}
			// The dead letter goes after its month.
			env.Fake().Advance(23 * 24 * time.Hour)
			if rep, err := env.Engine.SweepRetention(ctx, false); err != nil || rep.Runs != 1 || rep.ByState["failed"] != 1 {
				t.Fatalf("after 31 days: %+v, %v; want the dead letter", rep, err)
			}
			if _, err := env.Engine.GetRun(ctx, live); err != nil {
				t.Errorf("the live run was deleted: %v", err)
			}
		})
	}
}

// TestRetentionSweeperRunsOnTheClock: nobody calls SweepRetention; the sweeper does, on the
// engine's clock, with the defaults.
func TestRetentionSweeperRunsOnTheClock(t *testing.T) {
	t.Parallel()
	env := retentionEnv(t, testenv.OpenSQLite(t), engine.RetentionConfig{})
	id := enqueueIn(t, env, "never", "x")
	if _, err := env.Engine.Cancel(context.Background(), id, "test"); err != nil {
		t.Fatal(err)
	}
	env.Fake().Advance(engine.DefaultRetention + time.Hour)
	deadline := time.Now().Add(10 * time.Second)
	for {
		env.Fake().Advance(engine.DefaultRetentionEvery)
		_, err := env.Engine.GetRun(context.Background(), id)
		if jobs.CodeOf(err) == jobs.CodeRunNotFound {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sweeper never deleted the run: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRetentionArchiveFailureKeepsTheRun: a run whose archive cannot be written is not deleted;
// the run archived before it is (it is not archived again by the next sweep), and the sweep
// reports the failure.
func TestRetentionArchiveFailureKeepsTheRun(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	env := retentionEnv(t, testenv.OpenSQLite(t), engine.RetentionConfig{Every: 1000 * time.Hour,
		Archive: engine.WriterArchive(failAfter{w: &buf})})
	a, b := enqueueIn(t, env, "never", "a"), enqueueIn(t, env, "never", "b")
	for _, id := range []string{a, b} {
		if _, err := env.Engine.Cancel(context.Background(), id, "test"); err != nil {
			t.Fatal(err)
		}
		env.Fake().Advance(time.Second) // a finished first, so it is listed (and archived) first
	}
	env.Fake().Advance(8 * 24 * time.Hour)
	if _, err := env.Engine.SweepRetention(context.Background(), false); err == nil {
		t.Fatal("sweep with a failing archive: no error")
	}
	if _, err := env.Engine.GetRun(context.Background(), b); err != nil {
		t.Errorf("run %s deleted although its archive failed: %v", b, err)
	}
	if _, err := env.Engine.GetRun(context.Background(), a); jobs.CodeOf(err) != jobs.CodeRunNotFound {
		t.Errorf("run %s, archived, after the sweep: %v, want deleted", a, err)
	}
}

// failAfter accepts the first write (the first run's archive), then fails: a full disk.
type failAfter struct {
	w *bytes.Buffer
}

func (f failAfter) Write(p []byte) (int, error) {
	if f.w.Len() > 0 {
		return 0, errors.New("disk full")
	}
	return f.w.Write(p)
}

// WriterArchive's header is a JSON object whatever the job's name holds: a name may hold any
// character but NUL, and Go's quoting of a control character is not JSON's.
func TestWriterArchiveHeaderIsJSON(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	env := retentionEnv(t, testenv.OpenSQLite(t), engine.RetentionConfig{Every: 1000 * time.Hour,
		Archive: engine.WriterArchive(&buf)})
	const job = "odd\x01\vname\U000e0041"
	id := enqueueIn(t, env, job, "a")
	if _, err := env.Engine.Cancel(context.Background(), id, "test"); err != nil {
		t.Fatal(err)
	}
	env.Fake().Advance(8 * 24 * time.Hour)
	if rep, err := env.Engine.SweepRetention(context.Background(), false); err != nil || rep.Archived != 1 {
		t.Fatalf("sweep: %+v, %v", rep, err)
	}
	header, _, _ := bytes.Cut(buf.Bytes(), []byte("\n"))
	var h struct {
		Run, Job, State string
		Events          int
	}
	if err := json.Unmarshal(header, &h); err != nil || h.Job != job || h.Run != id || h.State != "cancelled" || h.Events < 1 {
		t.Fatalf("archive header %s: %v (%+v)", header, err, h)
	}
}
