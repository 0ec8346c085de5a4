// Package client is the operator's API: one interface of the questions and actions an
// application, the CLI or a tool asks of an engine, with the same methods and the same types
// whether the engine runs in this process (Local) or behind its HTTP API (*api.Client, which
// implements Client).
//
// Every answer is one of the engine's projections (engine.RunView, engine.RunPage,
// engine.QueueView, …): no implementation computes its own numbers, so a caller switching
// between the two sees the same data and the same X_ codes.
//
//	var c client.Client = client.Local(eng, sched) // in-process
//	// or remote, the same interface: c, err = api.NewClient("http://127.0.0.1:7233", token)
//	res, err := sendWelcome.Enqueue(ctx, c, Signup{UserID: "u-42"})
//	...
//	receipt, err := client.Wait[Receipt](ctx, c, res.RunID) // the result, or the run's error
package client

import (
	"context"
	"io"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/backfill"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/scheduler"
	"github.com/ultimat3/jobs/signals"
	"github.com/ultimat3/jobs/store"
)

// Reader is what a viewer may ask: every method reads and changes nothing.
type Reader interface {
	// GetRun returns a run with its per-step trace, failed attempts and retries; X_RUN_NOT_FOUND.
	GetRun(ctx context.Context, runID string) (engine.RunView, error)
	// ListRuns returns a page of runs, newest first; p.Before is the previous page's Next.
	// p.Limit is 1 to 500, 0 meaning 50.
	ListRuns(ctx context.Context, p store.ListParams) (engine.RunPage, error)
	// SearchRuns finds runs by id or key, filters and creation time, one keyset page at a time.
	SearchRuns(ctx context.Context, f engine.RunFilter) (engine.RunPage, error)
	// DeadLetters returns a page of dead-lettered (failed) runs, newest first; p.State is
	// ignored.
	DeadLetters(ctx context.Context, p store.ListParams) (engine.RunPage, error)
	// Queues returns every queue's depth by state, oldest ready age and dead letters.
	Queues(ctx context.Context) ([]engine.QueueView, error)
	// Overview returns every queue's health with its recent throughput (0, 0: the last 15
	// minutes by minute).
	Overview(ctx context.Context, window, bucket time.Duration) (engine.Overview, error)
	// Manifest returns the fleet's manifest; kind, when not empty, keeps that kind.
	Manifest(ctx context.Context, kind string) (engine.ManifestView, error)
	// Backfills returns the backfill ledger's projection, newest pass first.
	Backfills(ctx context.Context, f store.BackfillFilter) ([]backfill.Progress, error)
	// Schedules returns every declared schedule; X_NO_SCHEDULER when the engine runs none.
	Schedules(ctx context.Context) ([]scheduler.Info, error)
	// Schedule returns one schedule, or X_SCHEDULE_NOT_FOUND.
	Schedule(ctx context.Context, name string) (scheduler.Info, error)
	// DumpHistory writes the run's history to w as JSON lines, the format `engine history dump`
	// writes, history.Load reads and replay.Check replays.
	DumpHistory(ctx context.Context, runID string, w io.Writer) error
	// WaitResult blocks until the run is terminal or ctx ends. A completed run returns its
	// result (RunResult.Decode, or Wait); a failed or cancelled one returns its outcome with
	// the run's error (its own code, or X_RUN_CANCELLED).
	WaitResult(ctx context.Context, runID string) (engine.RunResult, error)
}

// Actor is what an operator may do besides reading.
type Actor interface {
	// Enqueue starts a run, or returns the live run holding the same (job, key).
	Enqueue(ctx context.Context, req jobs.EnqueueRequest) (jobs.EnqueueResult, error)
	// Publish encodes payload (jobs.Encode) and publishes it as the event name.
	Publish(ctx context.Context, name string, payload any) (signals.Published, error)
	// Cancel cancels a run; a finished one is refused with X_JOB_NOT_CANCELLABLE.
	Cancel(ctx context.Context, runID, reason string) (engine.RunSummary, error)
	// Retry reopens a dead-lettered or blocked run, from req.FromStep when it is set
	// (X_STEP_NOT_FOUND when the history holds no completed step of that name).
	Retry(ctx context.Context, req engine.RetryRequest) (engine.RunSummary, error)
	// PauseSchedule, ResumeSchedule and TriggerSchedule act on a schedule.
	PauseSchedule(ctx context.Context, name string) (scheduler.Info, error)
	ResumeSchedule(ctx context.Context, name string) (scheduler.Info, error)
	TriggerSchedule(ctx context.Context, name string) (jobs.EnqueueResult, error)
}

// Client is the whole operator's API: Local in-process, *api.Client over HTTP.
type Client interface {
	Reader
	Actor
}

// Wait waits for the run's result (Client.WaitResult) and decodes it as T.
func Wait[T any](ctx context.Context, c Reader, runID string) (T, error) {
	var out T
	res, err := c.WaitResult(ctx, runID)
	if err != nil {
		return out, err
	}
	return out, res.Decode(&out)
}
