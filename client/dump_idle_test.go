package client_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
)

// slowPages is a store whose history reads for a dump return at most perPage events each, and
// wait before they answer: every read after seq 0 waits each, and the read after seq at (0 the
// first) waits once instead, when once is set.
type slowPages struct {
	store.Store
	perPage int
	each    atomic.Int64 // time.Duration
	once    atomic.Int64 // time.Duration; 0: none
	at      atomic.Int64
}

func (s *slowPages) HistoryRead(ctx context.Context, id string, after int64, limit int) ([]history.Event, error) {
	if limit > 0 {
		limit = min(limit, s.perPage)
		wait := time.Duration(0)
		if after > 0 {
			wait = time.Duration(s.each.Load())
		}
		if once := time.Duration(s.once.Load()); once > 0 && after == s.at.Load() {
			wait = once
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.Store.HistoryRead(ctx, id, after, limit)
}

// pagedRun writes a run of n steps of about 8 KiB each on env's store, and returns its id with
// history.Dump of its whole history.
func pagedRun(t *testing.T, env *testenv.Env, n int) (string, []byte) {
	t.Helper()
	ctx := t.Context()
	res, err := env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "dump", Queue: "dump", Key: "k", NoTenant: true})
	if err != nil {
		t.Fatal(err)
	}
	now := env.Clock.Now()
	runs, err := env.Store.RunClaim(ctx, store.ClaimParams{WorkerID: "w", Queues: []string{"dump"}, Limit: 1,
		Now: now, LeaseUntil: now.Add(time.Hour), StickyBefore: now})
	if err != nil || len(runs) != 1 {
		t.Fatalf("claim: %d runs, %v", len(runs), err)
	}
	out, _ := msgpack.Marshal(strings.Repeat("o", 8<<10))
	var evs []history.Event
	for i := range n {
		evs = append(evs, history.New(now, history.StepCompleted{StepName: fmt.Sprintf("s%03d", i), Output: out}))
	}
	if r, err := env.Store.RunApply(ctx, []store.Mutation{{RunID: runs[0].ID, Fence: runs[0].Fence, Now: now, Events: evs}}); err != nil || r[0].Err != nil {
		t.Fatalf("apply: %v", err)
	}
	whole, err := env.Store.HistoryRead(ctx, res.RunID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := history.Dump(&want, whole); err != nil {
		t.Fatal(err)
	}
	return res.RunID, want.Bytes()
}

// The HTTP client's timeout bounds the wait for the answer's headers and each wait for more of
// the body, not the whole dump: a dump of pages that each take less than the timeout, and
// together more, is whole; a page that takes longer than the timeout is X_STORE_UNAVAILABLE
// after the pages before it, and so is a first page (the headers) that does.
func TestDumpHistoryTimeoutIsPerRead(t *testing.T) {
	t.Parallel()
	const timeout = 400 * time.Millisecond
	st := &slowPages{Store: testenv.Backends()[0].Open(t), perPage: 10}
	env := testenv.Start(t, testenv.Options{Store: st})
	srv, err := api.NewServer(api.Config{Engine: env.Engine, Logger: env.Logger, Addr: "127.0.0.1:0", NoUI: true})
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
	hc, err := api.NewClient("http://"+srv.Addr(), "", api.WithTimeout(timeout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hc.Close)
	id, want := pagedRun(t, env, 80) // 8 pages: the first, and 7 that wait

	st.each.Store(int64(timeout / 4)) // 7 × 100ms: the whole dump takes longer than the timeout
	var got bytes.Buffer
	if err := hc.DumpHistory(t.Context(), id, &got); err != nil || !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("DumpHistory of pages each within the timeout = %v, %d of %d bytes; want it whole", err, got.Len(), len(want))
	}

	st.each.Store(0)
	st.at.Store(40)
	st.once.Store(int64(3 * timeout)) // the page after seq 40 takes longer than the timeout
	got.Reset()
	err = hc.DumpHistory(t.Context(), id, &got)
	if !jobs.HasCode(err, jobs.CodeStoreUnavailable) || got.Len() == 0 || got.Len() >= len(want) {
		t.Fatalf("DumpHistory with a page past the timeout = %v, %d of %d bytes; want X_STORE_UNAVAILABLE after the pages before it",
			err, got.Len(), len(want))
	}

	st.at.Store(0) // the first page, read before the headers
	got.Reset()
	err = hc.DumpHistory(t.Context(), id, &got)
	if !jobs.HasCode(err, jobs.CodeStoreUnavailable) || got.Len() != 0 {
		t.Fatalf("DumpHistory whose headers take longer than the timeout = %v, %d bytes; want X_STORE_UNAVAILABLE, nothing written", err, got.Len())
	}
}

// The server gives a streamed dump its WriteTimeout again for each page, through its own
// wrappers of the ResponseWriter: a dump of pages that each take less than WriteTimeout, and
// together more, is whole; one page that takes longer cuts the answer, which the client reads as
// X_STORE_UNAVAILABLE.
func TestDumpHistoryWriteTimeoutIsPerPage(t *testing.T) {
	t.Parallel()
	const writeTimeout = 400 * time.Millisecond
	st := &slowPages{Store: testenv.Backends()[0].Open(t), perPage: 10}
	env := testenv.Start(t, testenv.Options{Store: st})
	srv, err := api.NewServer(api.Config{Engine: env.Engine, Logger: env.Logger, NoUI: true})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(srv)
	ts.Config.WriteTimeout = writeTimeout
	ts.Start()
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Drain)
	hc, err := api.NewClient(ts.URL, "", api.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hc.Close)
	id, want := pagedRun(t, env, 80)

	st.each.Store(int64(writeTimeout / 4))
	var got bytes.Buffer
	if err := hc.DumpHistory(t.Context(), id, &got); err != nil || !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("DumpHistory of pages each within WriteTimeout = %v, %d of %d bytes; want it whole", err, got.Len(), len(want))
	}

	st.each.Store(0)
	st.at.Store(40)
	st.once.Store(int64(2 * writeTimeout))
	got.Reset()
	err = hc.DumpHistory(t.Context(), id, &got)
	if !jobs.HasCode(err, jobs.CodeStoreUnavailable) || got.Len() == 0 || got.Len() >= len(want) {
		t.Fatalf("DumpHistory with a page past WriteTimeout = %v, %d of %d bytes; want X_STORE_UNAVAILABLE after the pages before it",
			err, got.Len(), len(want))
	}
}
