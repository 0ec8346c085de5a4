package engine_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
)

// pageRead is one history read a dump made.
type pageRead struct {
	after       int64
	limit, got  int
	bytes       int
	first, last int64
}

// pageReads is a store that records the history reads of one run.
type pageReads struct {
	store.Store
	mu    sync.Mutex
	runID string
	reads []pageRead
}

func (s *pageReads) HistoryRead(ctx context.Context, id string, after int64, limit int) ([]history.Event, error) {
	events, err := s.Store.HistoryRead(ctx, id, after, limit)
	s.mu.Lock()
	defer s.mu.Unlock()
	if id == s.runID && err == nil {
		r := pageRead{after: after, limit: limit, got: len(events)}
		for _, e := range events {
			r.bytes += len(e.Data)
		}
		if len(events) > 0 {
			r.first, r.last = events[0].Seq, events[len(events)-1].Seq
		}
		s.reads = append(s.reads, r)
	}
	return events, err
}

// longRun creates a run and appends n StepCompleted events to it, each with an output of size
// bytes, straight through the store (a worker would take a record a step).
func longRun(t *testing.T, env *testenv.Env, key string, n, size int) string {
	t.Helper()
	out, err := msgpack.Marshal(strings.Repeat("x", size))
	if err != nil {
		t.Fatal(err)
	}
	return env.LongRun(jobs.EnqueueRequest{Job: "long", Queue: "long-" + key, Key: key, NoTenant: true}, n, out, nil)
}

// An operator's read of a history (HistoryPages, what the HTTP API and client.InProcess dump)
// goes in pages of at most DumpPageEvents events, never a read of the whole history (limit 0),
// and gives the events History gives, seq for seq and byte for byte, on every store. A history
// of 1 MiB steps is read a few steps a page: no page after the first passes DumpPageBytes.
func TestHistoryPagesReadsAHistoryInBoundedPages(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			st := &pageReads{Store: b.Open(t)}
			env := testenv.Start(t, testenv.Options{Store: st})
			for _, c := range []struct {
				key        string
				n, size    int
				minReads   int
				bytesBound bool
			}{
				{"small", 1200, 10, 3, false},
				{"large", 40, 1 << 20, 4, true},
			} {
				id := longRun(t, env, c.key, c.n, c.size)
				whole, err := env.Store.HistoryRead(t.Context(), id, 0, 0)
				if err != nil || len(whole) != c.n+1 {
					t.Fatalf("%s: the whole history: %d events, %v", c.key, len(whole), err)
				}
				st.mu.Lock()
				st.runID, st.reads = id, nil
				st.mu.Unlock()
				pages := env.Engine.HistoryPages(t.Context(), id)
				var got []history.Event
				for {
					page, err := pages(int64(len(got)))
					if err != nil {
						t.Fatal(err)
					}
					if len(page) == 0 {
						break
					}
					got = append(got, page...)
				}
				if len(got) != len(whole) {
					t.Fatalf("%s: the pages hold %d events; the history has %d", c.key, len(got), len(whole))
				}
				for i := range got {
					g, w := got[i], whole[i]
					if g.Seq != w.Seq || g.Kind != w.Kind || g.Name != w.Name || !g.At.Equal(w.At) || !bytes.Equal(g.Data, w.Data) {
						t.Fatalf("%s: paged event %d is %+v; History's is %+v", c.key, i, g, w)
					}
				}
				st.mu.Lock()
				reads := st.reads
				st.mu.Unlock()
				if len(reads) < c.minReads {
					t.Errorf("%s: %d reads, want at least %d: %+v", c.key, len(reads), c.minReads, reads)
				}
				for i, r := range reads {
					if r.limit <= 0 || r.limit > engine.DumpPageEvents || r.got > r.limit {
						t.Errorf("%s: read %d: limit %d, got %d; want 1..%d", c.key, i, r.limit, r.got, engine.DumpPageEvents)
					}
					if c.bytesBound && i > 0 && r.bytes > engine.DumpPageBytes {
						t.Errorf("%s: read %d holds %d bytes, more than DumpPageBytes (%d)", c.key, i, r.bytes, engine.DumpPageBytes)
					}
				}
			}
		})
	}
}
