package client_test

import (
	"bytes"
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/client"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
)

// laterPageFails is a store whose history reads after seq 0 fail while fail is set.
type laterPageFails struct {
	store.Store
	fail atomic.Bool
}

func (s *laterPageFails) HistoryRead(ctx context.Context, id string, after int64, limit int) ([]history.Event, error) {
	if s.fail.Load() && after > 0 {
		return nil, jobs.Errorf(jobs.CodeStoreUnavailable, "the store went away")
	}
	return s.Store.HistoryRead(ctx, id, after, limit)
}

// DumpHistory streams on both sides: the in-process client and the HTTP client write the whole
// dump (history.Dump of the history) when every page is read, and when the store fails on a
// later page each returns X_STORE_UNAVAILABLE, never nil, after writing the pages before it.
func TestDumpHistoryCutShortIsAnErrorOnBothSides(t *testing.T) {
	t.Parallel()
	st := &laterPageFails{Store: testenv.Backends()[0].Open(t)}
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
	hc, err := api.NewClient("http://"+srv.Addr(), "", api.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hc.Close)

	ctx := t.Context()
	out, _ := msgpack.Marshal(strings.Repeat("o", 1024))
	runID := env.LongRun(jobs.EnqueueRequest{Job: "dump", Queue: "dump", Key: "k", NoTenant: true}, 200, out, nil)
	whole, err := env.Store.HistoryRead(ctx, runID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := history.Dump(&want, whole); err != nil {
		t.Fatal(err)
	}

	for _, side := range []struct {
		name string
		c    client.Client
	}{{"local", client.Local(env.Engine, nil)}, {"http", hc}} {
		st.fail.Store(false)
		var got bytes.Buffer
		if err := side.c.DumpHistory(ctx, runID, &got); err != nil || !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("%s: DumpHistory = %v, %d bytes; want history.Dump's %d", side.name, err, got.Len(), want.Len())
		}
		st.fail.Store(true)
		got.Reset()
		err := side.c.DumpHistory(ctx, runID, &got)
		if !jobs.HasCode(err, jobs.CodeStoreUnavailable) || got.Len() == 0 || got.Len() >= want.Len() {
			t.Errorf("%s: DumpHistory failing on a later page = %v, %d of %d bytes written; want X_STORE_UNAVAILABLE after the first page",
				side.name, err, got.Len(), want.Len())
		}
	}
}
