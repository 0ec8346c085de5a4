package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
)

// failingPages is a store whose history reads after seq 0 fail while fail is set.
type failingPages struct {
	store.Store
	fail atomic.Bool
}

func (s *failingPages) HistoryRead(ctx context.Context, id string, after int64, limit int) ([]history.Event, error) {
	if s.fail.Load() && after > 0 {
		return nil, jobs.Errorf(jobs.CodeStoreUnavailable, "the store went away")
	}
	return s.Store.HistoryRead(ctx, id, after, limit)
}

// `history dump` prints the dump as it arrives: jsonl is history.Dump of the history, --json
// the array printJSON prints of its lines (as when the dump was read whole first). A store that
// fails on a later page makes the command exit non-zero with X_STORE_UNAVAILABLE on stderr, in
// both formats and the table, whatever was printed before.
func TestHistoryDumpStreamsAndFailsNonZero(t *testing.T) {
	t.Parallel()
	st := &failingPages{Store: memory.New()}
	env := testenv.Start(t, testenv.Options{Store: st})
	srv, err := api.NewServer(api.Config{Engine: env.Engine, Logger: env.Logger, Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Drain)
	o := &opsEnv{env: env, server: []string{"--server", ts.URL, "--token", "tok"}}

	ctx := t.Context()
	out, _ := msgpack.Marshal(strings.Repeat("<o>", 400))
	runID := env.LongRun(jobs.EnqueueRequest{Job: "dump", Queue: "dump", Key: "k", NoTenant: true}, 200, out, nil)
	whole, err := env.Store.HistoryRead(ctx, runID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := history.Dump(&want, whole); err != nil {
		t.Fatal(err)
	}
	var lines []json.RawMessage
	for _, l := range bytes.Split(bytes.TrimSpace(want.Bytes()), []byte{'\n'}) {
		lines = append(lines, l)
	}
	var wantJSON bytes.Buffer
	if err := printJSON(&wantJSON, lines); err != nil {
		t.Fatal(err)
	}

	r := o.run(t, "history", "dump", runID)
	expect(t, r, 0, "")
	if r.stdout != want.String() {
		t.Errorf("history dump printed %d bytes, not history.Dump's %d", len(r.stdout), want.Len())
	}
	r = o.run(t, "history", "dump", runID, "--json")
	expect(t, r, 0, "")
	if r.stdout != wantJSON.String() {
		t.Errorf("history dump --json printed\n%.400s\nwant\n%.400s", r.stdout, wantJSON.String())
	}

	st.fail.Store(true)
	for _, args := range [][]string{{}, {"--json"}, {"--format", "table"}} {
		r := o.run(t, append([]string{"history", "dump", runID}, args...)...)
		if r.code == 0 || !strings.HasPrefix(r.stderr, "X_STORE_UNAVAILABLE: ") {
			t.Errorf("history dump %v failing on a later page: exit %d, stderr %q; want non-zero and X_STORE_UNAVAILABLE", args, r.code, r.stderr)
		}
	}
}

// The array writer prints no events as an empty array, and a line without its newline at the
// end.
func TestJSONArrayWriterEnds(t *testing.T) {
	for in, want := range map[string]string{"": "[]\n", `{"a":1}`: "[\n  {\n    \"a\": 1\n  }\n]\n", "{\"a\":1}\n{}\n": "[\n  {\n    \"a\": 1\n  },\n  {}\n]\n"} {
		var out bytes.Buffer
		a := &jsonArrayWriter{w: &out}
		if _, err := a.Write([]byte(in)); err != nil {
			t.Fatal(err)
		}
		if err := a.close(); err != nil || out.String() != want {
			t.Errorf("%q: %q (%v), want %q", in, out.String(), err, want)
		}
	}
}
