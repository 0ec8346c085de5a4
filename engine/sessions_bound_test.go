package engine

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/race"
	"github.com/ultimat3/jobs/store/memory"
)

func boundEngine(t *testing.T) (*Engine, *clock.Fake) {
	t.Helper()
	fake := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	e, err := New(Config{Store: memory.New(), Clock: fake})
	if err != nil {
		t.Fatal(err)
	}
	return e, fake
}

func liveRecords(e *Engine) int {
	e.sessions.mu.Lock()
	defer e.sessions.mu.Unlock()
	return len(e.sessions.lives)
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// An answered attend keeps its worker live for the re-attend window only: ids that attend once
// and never again (a worker that left, or a caller naming a new id on every attend) are
// forgotten once the window has passed, so the engine's session table does not grow for good.
func TestAnsweredSessionsAreForgotten(t *testing.T) {
	e, fake := boundEngine(t)
	const n = 40_000
	before := heapInUse()
	for i := range n {
		id := fmt.Sprintf("worker-%08d", i)
		e.SessionOpened(id)
		e.SessionAnswered(id)
	}
	if !e.SessionLive("worker-00000000") || !e.SessionLive(fmt.Sprintf("worker-%08d", n-1)) {
		t.Fatal("an answered attend is not live within the re-attend window")
	}
	if got := liveRecords(e); got != n {
		t.Fatalf("%d session records within the window, want %d", got, n)
	}
	fake.Advance(reattendWindow)
	// Any call that touches the table sweeps it: here, a new worker's attend.
	e.SessionOpened("another")
	e.SessionAnswered("another")
	if e.SessionLive("worker-00000000") {
		t.Fatal("an answered attend is still live past the re-attend window")
	}
	if got := liveRecords(e); got != 1 {
		t.Fatalf("%d session records past the window, want 1 (the last attend's)", got)
	}
	if !race.Enabled {
		// The table held about 235 bytes per id, 9 MB for these, when nothing was forgotten.
		if grew := int64(heapInUse()) - int64(before); grew > 2<<20 {
			t.Fatalf("the heap grew by %d KB after %d answered attends past their window; want under 2 MB", grew>>10, n)
		}
	}

	// An open attend is never forgotten, however long it is held, and neither is an answered
	// one within its window.
	e.SessionOpened("held")
	e.SessionOpened("answered")
	fake.Advance(time.Hour)
	e.SessionAnswered("answered")
	e.SessionOpened("toucher")
	if !e.SessionLive("held") || !e.SessionLive("answered") {
		t.Fatal("a session still attended, or just answered, was forgotten")
	}
}

// A forged drop beside a live attend still releases nothing after the table is swept: the live
// attend's record is kept (it is open), so the drop finds it and is ignored.
func TestSweptTableKeepsTheOpenAttend(t *testing.T) {
	e, fake := boundEngine(t)
	e.SessionOpened("host-a")
	fake.Advance(time.Minute)
	e.SessionOpened("sweeper") // sweeps: host-a's attend is open, so it stays
	if got := e.sessions.ended("host-a", false, fake.Now()); got != 0 {
		t.Fatalf("the first drop leaves %d attends open, want 0", got)
	}
	e.SessionOpened("host-a")
	e.SessionOpened("host-a") // the forger's attend beside the worker's
	fake.Advance(time.Minute)
	e.SessionOpened("sweeper-2")
	if got := e.sessions.ended("host-a", false, fake.Now()); got != 1 {
		t.Fatalf("a drop beside a live attend leaves %d attends open, want 1", got)
	}
	if !e.SessionLive("host-a") {
		t.Fatal("the worker's own attend is not live after a drop beside it")
	}
}

// A session's worker id is bounded like every name the engine keeps (1,000 bytes), for
// in-process callers as for the HTTP API: an attend cannot pin a megabyte in the session table.
func TestSessionWorkerIDIsBounded(t *testing.T) {
	e, _ := boundEngine(t)
	long := strings.Repeat("w", 1001)
	// An attend the engine took would hold until ctx ends (the fake clock does not move).
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	for name, call := range map[string]func() error{
		"start":  func() error { return e.WorkerStart(ctx, frontend.Session{WorkerID: long}) },
		"stop":   func() error { return e.WorkerStop(ctx, frontend.Session{WorkerID: long}) },
		"attend": func() error { return e.Attend(ctx, frontend.Session{WorkerID: long, Wait: time.Nanosecond}) },
		"nul":    func() error { return e.Attend(ctx, frontend.Session{WorkerID: "a\x00b", Wait: time.Nanosecond}) },
		"utf8":   func() error { return e.Attend(ctx, frontend.Session{WorkerID: "a\xffb", Wait: time.Nanosecond}) },
	} {
		if err := call(); !jobs.HasCode(err, jobs.CodeBadRequest) {
			t.Errorf("%s under a bad worker id: %v, want X_BAD_REQUEST", name, err)
		}
	}
	// The remote session's entry points answer nothing; they record nothing either.
	before := heapInUse()
	huge := strings.Repeat("w", 1<<20)
	for i := range 50 {
		id := fmt.Sprintf("%04d", i) + huge
		e.SessionOpened(id)
		e.SessionAnswered(id)
		e.SessionOpened(id)
		e.SessionDropped(id)
	}
	huge = ""
	if got := liveRecords(e); got != 0 {
		t.Fatalf("%d session records under ids over the limit, want 0", got)
	}
	if !race.Enabled {
		if grew := int64(heapInUse()) - int64(before); grew > 8<<20 {
			t.Fatalf("the heap grew by %d MB after attends under 1 MiB ids; want under 8 MB (they were kept: 50 MB)", grew>>20)
		}
	}
	id := strings.Repeat("w", 1000) // at the limit: served
	e.SessionOpened(id)
	if !e.SessionLive(id) {
		t.Fatal("an attend under a 1,000-byte id is not live")
	}
}
