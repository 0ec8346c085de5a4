package storetest

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
)

var keyTests = []test{
	{"the first key stored wins and never changes", func(t *testing.T, s store.Store) {
		ctx := context.Background()
		k1, err := s.KeyEnsure(ctx, "lease", []byte("first"))
		if err != nil {
			t.Fatal(err)
		}
		k2, err := s.KeyEnsure(ctx, "lease", []byte("second"))
		if err != nil {
			t.Fatal(err)
		}
		if string(k1) != "first" || string(k2) != "first" {
			t.Fatalf("got %q then %q, want %q twice", k1, k2, "first")
		}
		other, err := s.KeyEnsure(ctx, "other", []byte("x"))
		if err != nil || string(other) != "x" {
			t.Fatalf("another name: got %q, %v", other, err)
		}
	}},
	{"concurrent ensurers all get one key", func(t *testing.T, s store.Store) {
		ctx := context.Background()
		const n = 8
		got := make([][]byte, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[i], errs[i] = s.KeyEnsure(ctx, "lease", []byte(fmt.Sprintf("candidate-%d", i)))
			}()
		}
		wg.Wait()
		for i := range n {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			if !bytes.Equal(got[i], got[0]) {
				t.Fatalf("ensurer %d got %q, ensurer 0 got %q", i, got[i], got[0])
			}
		}
	}},
}

// seqTests hold Mutation.AfterSeq: a write built on an older (or a future) history is refused
// and changes nothing, in every shape of batch a backend may treat on its own path (steps and
// completions alone, or with timers and waits).
var seqTests = []test{
	{"a write on the current seq applies", func(t *testing.T, s store.Store) {
		r := running(t, s, 1)
		m := mutation(r, store.Transition{}, step("a"))
		m.AfterSeq = r.LastSeq
		res := applyOK(t, s, m)
		if res.Run.LastSeq != 2 {
			t.Fatalf("LastSeq %d, want 2", res.Run.LastSeq)
		}
	}},
	{"a stale or future seq is refused and changes nothing", func(t *testing.T, s store.Store) {
		r := running(t, s, 1)
		first := mutation(r, store.Transition{}, step("a"))
		first.AfterSeq = 1
		applyOK(t, s, first)
		for _, after := range []int64{1, 7} {
			for name, tr := range map[string]store.Transition{
				"step":     {},
				"complete": {State: store.StateCompleted, Result: []byte{0xc0}},
				"sleep": {State: store.StateSuspended,
					Timers: []store.Timer{{Key: "sleep:b", DueAt: sleepUntil, Fire: timerFired("b")}}},
			} {
				m := mutation(r, tr, step("b"))
				m.AfterSeq = after
				res := apply(t, s, m)[0]
				wantCode(t, name+" on a stale seq", res.Err, jobs.CodeHistoryStale)
				got := get(t, s, r.ID)
				if got.State != store.StateRunning || got.LastSeq != 2 {
					t.Fatalf("%s refused, yet the run is %s at seq %d", name, got.State, got.LastSeq)
				}
				wantKinds(t, "history", events(t, s, r.ID), history.KindRunStarted, history.KindStepCompleted)
			}
		}
		if _, ok := timerNext(t, s); ok {
			t.Fatal("a refused sleep armed its timer")
		}
	}},
	{"a stale write does not stop its neighbours", func(t *testing.T, s store.Store) {
		r1, r2 := running(t, s, 1), running(t, s, 2)
		stale := mutation(r1, store.Transition{}, step("a"))
		stale.AfterSeq = 5
		good := mutation(r2, store.Transition{State: store.StateCompleted, Result: []byte{0xc0}}, step("a"))
		good.AfterSeq = 1
		res := apply(t, s, stale, good)
		wantCode(t, "stale", res[0].Err, jobs.CodeHistoryStale)
		if res[1].Err != nil || res[1].Run.State != store.StateCompleted {
			t.Fatalf("neighbour: %+v", res[1])
		}
	}},
	{"no AfterSeq is not checked", func(t *testing.T, s store.Store) {
		r := running(t, s, 1)
		applyOK(t, s, mutation(r, store.Transition{}, step("a")))
		applyOK(t, s, mutation(r, store.Transition{}, step("b")))
	}},
}

func declared(kind, name, sum, data string) store.Declared {
	return store.Declared{Kind: kind, Name: name, Checksum: sum, Data: []byte(data)}
}

func readManifest(t *testing.T, s store.Store, kind string) ([]store.DeclarationRecord, []store.WorkerRecord) {
	t.Helper()
	d, w, err := s.ManifestRead(t.Context(), kind)
	if err != nil {
		t.Fatalf("ManifestRead(%q): %v", kind, err)
	}
	return d, w
}

func putManifest(t *testing.T, s store.Store, p store.ManifestParams) {
	t.Helper()
	if err := s.ManifestPut(t.Context(), p); err != nil {
		t.Fatalf("ManifestPut(%s): %v", p.WorkerID, err)
	}
}

// declaredBy renders a declaration's identity and workers for comparison.
func declaredBy(ds []store.DeclarationRecord) []string {
	var out []string
	for _, d := range ds {
		s := d.Kind + "/" + d.Name + "/" + d.Checksum + ":"
		for _, w := range d.Workers {
			s += " " + w.WorkerID
		}
		out = append(out, s)
	}
	return out
}

var manifestTests = []test{
	{"a manifest is kept with who declared what and when", func(t *testing.T, s store.Store) {
		putManifest(t, s, store.ManifestParams{WorkerID: "w-b", Queues: []string{"q2"}, Now: at(time.Second),
			Declared: []store.Declared{declared("job", "j1", "c2", `{"queue":"q2"}`)}})
		putManifest(t, s, store.ManifestParams{WorkerID: "w-a", Queues: []string{"q1", "q2"}, Now: at(2 * time.Second),
			Declared: []store.Declared{declared("job", "j1", "c1", `{"queue":"q1"}`), declared("schedule", "nightly", "c3", `{"cron":"0 3 * * *"}`)}})
		all, workers := readManifest(t, s, "")
		want := []string{"job/j1/c1: w-a", "job/j1/c2: w-b", "schedule/nightly/c3: w-a"}
		if got := declaredBy(all); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("declarations %q, want %q", got, want)
		}
		if string(all[0].Data) != `{"queue":"q1"}` || !all[0].FirstSeen.Equal(at(2*time.Second)) || !all[0].LastSeen.Equal(at(2*time.Second)) ||
			!all[0].Workers[0].LastSeen.Equal(at(2*time.Second)) {
			t.Fatalf("j1/c1 = %+v", all[0])
		}
		if len(workers) != 2 || workers[0].ID != "w-a" || fmt.Sprint(workers[0].Queues) != "[q1 q2]" ||
			!workers[0].LastSeen.Equal(at(2*time.Second)) || workers[1].ID != "w-b" {
			t.Fatalf("workers %+v", workers)
		}
		jobsOnly, _ := readManifest(t, s, "job")
		if len(jobsOnly) != 2 {
			t.Fatalf("kind job: %q", declaredBy(jobsOnly))
		}
	}},
	{"a later manifest replaces the worker's, and what it dropped is kept without it", func(t *testing.T, s store.Store) {
		putManifest(t, s, store.ManifestParams{WorkerID: "w-a", Queues: []string{"q1"}, Now: at(time.Second),
			Declared: []store.Declared{declared("job", "j1", "c1", `{}`), declared("job", "j2", "c1", `{}`)}})
		putManifest(t, s, store.ManifestParams{WorkerID: "w-b", Queues: []string{"q1"}, Now: at(time.Second),
			Declared: []store.Declared{declared("job", "j2", "c1", `{}`)}})
		putManifest(t, s, store.ManifestParams{WorkerID: "w-a", Queues: []string{"q3"}, Now: at(time.Minute),
			Declared: []store.Declared{declared("job", "j1", "c1", `{}`)}})
		all, workers := readManifest(t, s, "job")
		if got := fmt.Sprint(declaredBy(all)); got != "[job/j1/c1: w-a job/j2/c1: w-b]" {
			t.Fatalf("declarations %s", got)
		}
		if !all[0].FirstSeen.Equal(at(time.Second)) || !all[0].LastSeen.Equal(at(time.Minute)) || !all[1].LastSeen.Equal(at(time.Second)) {
			t.Fatalf("sightings %+v", all)
		}
		if fmt.Sprint(workers[0].Queues) != "[q3]" || !workers[0].LastSeen.Equal(at(time.Minute)) {
			t.Fatalf("worker %+v", workers[0])
		}
		// At the same instant too: the manifest, not the clock, says what the worker holds.
		putManifest(t, s, store.ManifestParams{WorkerID: "w-a", Queues: []string{"q3"}, Now: at(time.Minute)})
		all, _ = readManifest(t, s, "")
		if got := fmt.Sprint(declaredBy(all)); got != "[job/j1/c1: job/j2/c1: w-b]" {
			t.Fatalf("after an empty manifest: %s", got)
		}
	}},
	{"an empty store has no manifest", func(t *testing.T, s store.Store) {
		all, workers := readManifest(t, s, "")
		if len(all) != 0 || len(workers) != 0 {
			t.Fatalf("%v %v", all, workers)
		}
	}},
}
