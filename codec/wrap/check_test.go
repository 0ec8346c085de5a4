package wrap_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/codec/wrap"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/replay"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

// The deploy check works on a run whose payloads are encrypted: wrap.CheckFile opens each event
// with the codec, so the unchanged code passes and a renamed step is X_REPLAY_DIVERGED. With
// replay.CheckFile alone every such dump was X_ENCODING, whatever the code.
func TestTheDeployCheckOpensEncryptedPayloads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	set := aesSet(t, "k1", "k1")
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	env.Worker(worker.Config{Frontend: wrap.Frontend(env.Engine, set)}, charge)
	res, err := charge.Enqueue(ctx, wrap.Enqueuer(env.Engine, set), order{ID: "o1", Card: "4242"})
	if err != nil {
		t.Fatal(err)
	}
	env.Await(res.RunID, store.StateSuspended)
	var dump bytes.Buffer
	if err := history.Dump(&dump, env.History(res.RunID)); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "charge.jsonl")
	if err := os.WriteFile(file, dump.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := replay.CheckFile(ctx, charge, file); !jobs.HasCode(err, jobs.CodeEncoding) {
		t.Fatalf("replay.CheckFile without the codec: %v; want X_ENCODING (it cannot read the payloads)", err)
	}
	if err := wrap.CheckFile(ctx, charge, file, set); err != nil {
		t.Fatalf("the unchanged code: %v", err)
	}
	renamed := jobs.MustDefine("charge", func(o order) string { return o.ID }, jobs.NoTenant[order](),
		func(c *jobs.Ctx, o order) (string, error) {
			if _, err := jobs.Step(c, "tokenise", func(context.Context) (string, error) { return "x", nil }); err != nil {
				return "", err
			}
			return "", jobs.Sleep(c, "settle", time.Hour)
		}, jobs.Queue("pay"))
	if err := wrap.CheckFile(ctx, renamed, file, set); !jobs.HasCode(err, jobs.CodeReplayDiverged) {
		t.Fatalf("a renamed step: %v; want X_REPLAY_DIVERGED", err)
	}
}
