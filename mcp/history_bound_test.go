package mcp_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/client"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/mcp"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
)

// countedReads is a store that counts its history reads.
type countedReads struct {
	store.Store
	n atomic.Int64
}

func (s *countedReads) HistoryRead(ctx context.Context, id string, after int64, limit int) ([]history.Event, error) {
	s.n.Add(1)
	return s.Store.HistoryRead(ctx, id, after, limit)
}

// dump_history answers in one message, so it holds the dump: a dump past MaxHistoryDump is
// refused X_PAYLOAD_TOO_LARGE, naming `engine history dump`, as soon as it passes the bound (the
// rest of the history is not read), rather than held whole however large it is.
func TestDumpHistoryIsBounded(t *testing.T) {
	t.Parallel()
	st := &countedReads{Store: memory.New()}
	env := testenv.Start(t, testenv.Options{Store: st})
	ctx := t.Context()
	small, err := env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "big", Queue: "small", Key: "s", NoTenant: true})
	if err != nil {
		t.Fatal(err)
	}
	// 40 steps of 512 KiB: a dump of some 50 MiB, read in pages of 16 then 15.
	out, _ := msgpack.Marshal(strings.Repeat("o", 512<<10))
	bigID := env.LongRun(jobs.EnqueueRequest{Job: "big", Queue: "big", Key: "k", NoTenant: true}, 40, out, nil)

	cs := connectInMemory(t, mcp.NewServer(client.Local(env.Engine, nil), mcp.Options{}))
	before := st.n.Load()
	r := call(t, cs, mcp.ToolHistory, map[string]any{"run_id": bigID})
	refused(t, r, jobs.CodePayloadTooLarge)
	if !strings.Contains(text(r), "engine history dump "+bigID) {
		t.Errorf("the refusal does not name the command that streams the dump: %s", text(r))
	}
	if n := st.n.Load() - before; n != 1 {
		t.Errorf("%d history reads; the first page passes the bound, so the rest should not be read", n)
	}
	// A dump under the bound is answered as before.
	if r := call(t, cs, mcp.ToolHistory, map[string]any{"run_id": small.RunID}); r.IsError || !strings.Contains(text(r), `"kind":"RunStarted"`) {
		t.Errorf("dump_history of a small run: %s", text(r))
	}
}
