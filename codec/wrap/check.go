package wrap

import (
	"context"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/codec"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/replay"
)

// Check is replay.Check for a run whose payloads a codec encoded (a worker behind Frontend): each
// event's payload is opened by set first, so the deploy check compares the code's durable calls
// with the history's. A dump keeps the stored bytes, which replay.Check alone cannot decode: it
// answered X_ENCODING for every such run, a renamed step included.
//
//	if err := wrap.CheckFile(ctx, charge, "testdata/charge-run.jsonl", set); err != nil { t.Fatal(err) }
func Check(ctx context.Context, def jobs.Definition, events []history.Event, set *codec.Set) error {
	opened := make([]history.Event, len(events))
	for i, e := range events {
		opened[i] = OpenEvent(e, set)
	}
	return replay.Check(ctx, def, opened)
}

// CheckFile is Check over a dump file written by `engine history dump ID`.
func CheckFile(ctx context.Context, def jobs.Definition, path string, set *codec.Set) error {
	events, err := replay.LoadFile(path)
	if err != nil {
		return err
	}
	return Check(ctx, def, events, set)
}
