package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
)

// dumpStore is a store whose history reads of one run are watched: a read of the whole history
// (limit ≤ 0) is counted, as is every read, and reads after seq failFrom or later fail
// (X_STORE_UNAVAILABLE). A read of run empty finds no events.
type dumpStore struct {
	store.Store
	mu              sync.Mutex
	watch, empty    string
	reads, whole    int
	failing         bool
	failFrom        int64
	lastLimit, most int
}

func (s *dumpStore) set(f func(s *dumpStore)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

func (s *dumpStore) HistoryRead(ctx context.Context, id string, after int64, limit int) ([]history.Event, error) {
	s.mu.Lock()
	if id == s.empty {
		s.mu.Unlock()
		return []history.Event{}, nil
	}
	fail := false
	if id == s.watch {
		s.reads++
		if limit <= 0 {
			s.whole++
		}
		s.most = max(s.most, limit)
		fail = s.failing && after >= s.failFrom
	}
	s.mu.Unlock()
	if fail {
		return nil, jobs.Errorf(jobs.CodeStoreUnavailable, "the store went away")
	}
	return s.Store.HistoryRead(ctx, id, after, limit)
}

// streamRun creates a run of tenant (none when "") and appends n StepCompleted events of size
// bytes of output straight through the store, and the events mid (seq → event) at their seqs.
func streamRun(t *testing.T, env *testenv.Env, key, tenant string, n, size int, mid map[int]history.Event) string {
	t.Helper()
	out, err := msgpack.Marshal(strings.Repeat("o", size))
	if err != nil {
		t.Fatal(err)
	}
	return env.LongRun(jobs.EnqueueRequest{Job: "dump", Queue: "dump-" + key, Key: key, Tenant: tenant, NoTenant: tenant == ""}, n, out, mid)
}

// dumpGet sends GET path and returns the status, and the body read to its end or the error that
// cut it short.
func dumpGet(t *testing.T, url, token string) (int, []byte, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	return res.StatusCode, body, err
}

// GET /v1/runs/{id}/history reads the history a page at a time (engine.HistoryPages), never
// whole, on every store, and its answer is byte for byte history.Dump of the whole history, in
// JSON lines, and as one JSON array of the same objects; api.Client.DumpHistory writes the
// same bytes. An array is whole for one page, and for no events; a run that is not found is
// still refused X_RUN_NOT_FOUND in both formats.
func TestHistoryDumpIsStreamedInPages(t *testing.T) {
	t.Parallel()
	for _, be := range testenv.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			st := &dumpStore{Store: be.Open(t)}
			env := testenv.Start(t, testenv.Options{Store: st})
			srv, err := api.NewServer(api.Config{Engine: env.Engine, Logger: env.Logger, Token: "tok"})
			if err != nil {
				t.Fatal(err)
			}
			b := serveBundle(t, env, srv, "tok")
			long := streamRun(t, env, "long", "", 3000, 40, nil)
			short := streamRun(t, env, "short", "", 0, 0, nil)

			for _, c := range []struct {
				id       string
				minReads int
			}{{long, 4}, {short, 1}} {
				whole, err := env.Store.HistoryRead(t.Context(), c.id, 0, 0)
				if err != nil {
					t.Fatal(err)
				}
				var want bytes.Buffer
				if err := history.Dump(&want, whole); err != nil {
					t.Fatal(err)
				}
				st.set(func(s *dumpStore) { s.watch, s.reads, s.whole, s.most = c.id, 0, 0, 0 })
				st2, body, err := dumpGet(t, b.url+"/v1/runs/"+c.id+"/history", "tok")
				if err != nil || st2 != http.StatusOK || !bytes.Equal(body, want.Bytes()) {
					t.Fatalf("the jsonl dump of %d events (%d, %v) is not history.Dump of the whole history:\n%.300s", len(whole), st2, err, body)
				}
				st.mu.Lock()
				reads, wholeReads, most := st.reads, st.whole, st.most
				st.mu.Unlock()
				if wholeReads != 0 || reads < c.minReads || most > 500 {
					t.Errorf("the dump of %d events: %d reads (%d of the whole history, the largest page %d); want at least %d, none whole, pages of at most 500",
						len(whole), reads, wholeReads, most, c.minReads)
				}
				st2, arr, err := dumpGet(t, b.url+"/v1/runs/"+c.id+"/history?format=json", "tok")
				var objs []json.RawMessage
				lines := bytes.Split(bytes.TrimSpace(want.Bytes()), []byte{'\n'})
				if err != nil || st2 != http.StatusOK || json.Unmarshal(arr, &objs) != nil || len(objs) != len(lines) {
					t.Fatalf("format=json of %d events: %d, %v, %d objects:\n%.300s", len(whole), st2, err, len(objs), arr)
				}
				for i := range objs {
					if !bytes.Equal(objs[i], lines[i]) {
						t.Fatalf("format=json: object %d is %s; the line is %s", i, objs[i], lines[i])
					}
				}
				var viaClient bytes.Buffer
				if err := b.client.DumpHistory(t.Context(), c.id, &viaClient); err != nil || !bytes.Equal(viaClient.Bytes(), want.Bytes()) {
					t.Fatalf("api.Client.DumpHistory: %v; %d bytes, want %d", err, viaClient.Len(), want.Len())
				}
			}

			// No events: an empty dump, an empty array.
			st.set(func(s *dumpStore) { s.empty = short })
			if code, body, err := dumpGet(t, b.url+"/v1/runs/"+short+"/history", "tok"); err != nil || code != http.StatusOK || len(body) != 0 {
				t.Errorf("the dump of no events: %d %q %v", code, body, err)
			}
			if code, body, err := dumpGet(t, b.url+"/v1/runs/"+short+"/history?format=json", "tok"); err != nil || code != http.StatusOK || string(body) != "[]\n" {
				t.Errorf("format=json of no events: %d %q %v", code, body, err)
			}
			st.set(func(s *dumpStore) { s.empty = "" })

			missing := "0190a000-0000-7000-8000-000000000000"
			for _, q := range []string{"", "?format=json"} {
				if code, body, err := dumpGet(t, b.url+"/v1/runs/"+missing+"/history"+q, "tok"); err != nil || code != http.StatusNotFound || jsonCode(t, body) != jobs.CodeRunNotFound {
					t.Errorf("the history%s of a missing run: %d %s %v", q, code, body, err)
				}
			}
			if err := b.client.DumpHistory(t.Context(), missing, io.Discard); !jobs.HasCode(err, jobs.CodeRunNotFound) {
				t.Errorf("api.Client.DumpHistory of a missing run: %v", err)
			}
		})
	}
}

// A store that fails on a later page, after the 200 and the first page went out, leaves the
// client a body cut short in both formats, never one that ends as if whole, and the Go client's
// DumpHistory returns X_STORE_UNAVAILABLE, not nil, after writing what arrived. A store that
// fails on the first page is still a clean refusal, and the client writes nothing.
func TestHistoryDumpCutShortIsAnError(t *testing.T) {
	t.Parallel()
	st := &dumpStore{Store: testenv.Backends()[0].Open(t)}
	env := testenv.Start(t, testenv.Options{Store: st})
	srv, err := api.NewServer(api.Config{Engine: env.Engine, Logger: env.Logger, Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	b := serveBundle(t, env, srv, "tok")
	// 1 KiB steps: the first page is past what the server buffers before it sends.
	id := streamRun(t, env, "cut", "", 200, 1024, nil)
	st.set(func(s *dumpStore) { s.watch, s.failing, s.failFrom = id, true, 1 })

	for _, q := range []string{"", "?format=json"} {
		code, body, err := dumpGet(t, b.url+"/v1/runs/"+id+"/history"+q, "tok")
		if code != http.StatusOK || err == nil || len(body) == 0 {
			t.Errorf("history%s failing on its second page: %d, %d bytes, read error %v; want 200, the first page, and a body cut short", q, code, len(body), err)
		}
	}
	var w bytes.Buffer
	err = b.client.DumpHistory(t.Context(), id, &w)
	if !jobs.HasCode(err, jobs.CodeStoreUnavailable) || w.Len() == 0 {
		t.Fatalf("api.Client.DumpHistory failing on its second page: %v, %d bytes written; want X_STORE_UNAVAILABLE after the first page", err, w.Len())
	}

	// The first page's failure: a refusal, as before the dump was streamed.
	st.set(func(s *dumpStore) { s.failFrom = 0 })
	for _, q := range []string{"", "?format=json"} {
		code, body, err := dumpGet(t, b.url+"/v1/runs/"+id+"/history"+q, "tok")
		if err != nil || code != http.StatusServiceUnavailable || jsonCode(t, body) != jobs.CodeStoreUnavailable {
			t.Errorf("history%s failing on its first page: %d %s %v; want 503 X_STORE_UNAVAILABLE", q, code, body, err)
		}
	}
	w.Reset()
	if err := b.client.DumpHistory(t.Context(), id, &w); !jobs.HasCode(err, jobs.CodeStoreUnavailable) || w.Len() != 0 {
		t.Errorf("api.Client.DumpHistory failing on its first page: %v, %d bytes written", err, w.Len())
	}
}

// A tenant-scoped credential's dump is redacted on every page, not the first alone: a failed
// step's error naming another tenant's run, on the first page and on a page read hundreds of
// events later, reads "(hidden run)" in the dump's data and view, in both formats; the admin's
// dump names the run.
func TestHistoryDumpIsRedactedOnEveryPage(t *testing.T) {
	t.Parallel()
	b := setup(t, api.Config{Token: tsAdmin, Credentials: tsCreds})
	theirs, err := b.env.Engine.Enqueue(t.Context(), jobs.EnqueueRequest{Job: "ts-secret", Queue: "q", Key: "theirs", Tenant: "other"})
	if err != nil {
		t.Fatal(err)
	}
	now := b.env.Clock.Now()
	failed := func(name string) history.Event {
		return history.New(now, history.StepFailed{StepName: name, Error: "lookup of " + theirs.RunID + " failed"})
	}
	id := streamRun(t, b.env, "redact", "acme", 1500, 10, map[int]history.Event{3: failed("early"), 1400: failed("late")})

	raw, events := tsHistory(t, b, id, "ts-acme-view")
	if len(events) != 1501 {
		t.Fatalf("acme's dump has %d events, want 1501", len(events))
	}
	if strings.Contains(string(raw), theirs.RunID) {
		t.Errorf("acme's dump names the other tenant's run %s", theirs.RunID)
	}
	for _, seq := range []int{3, 1400} {
		p, err := events[seq-1].Decode()
		if f, ok := p.(history.StepFailed); err != nil || !ok || !strings.Contains(f.Error, "(hidden run)") {
			t.Errorf("acme's dump, seq %d: %+v (%v); want the other tenant's run hidden", seq, p, err)
		}
	}
	raw, events = tsHistory(t, b, id, tsAdmin)
	if n := strings.Count(decoded(t, events), theirs.RunID); n != 2 || !strings.Contains(string(raw), theirs.RunID) {
		t.Errorf("the admin's dump names the run %d times in its data; want 2", n)
	}
}
