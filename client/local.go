package client

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api/paging"
	"github.com/ultimat3/jobs/backfill"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/inputcheck"
	"github.com/ultimat3/jobs/scheduler"
	"github.com/ultimat3/jobs/signals"
	"github.com/ultimat3/jobs/store"
)

// InProcess is the Client of an engine in this process. It is a thin adapter: each method is
// one of the engine's (or the scheduler's) projections, checked as the HTTP API checks the same
// request, so Local and *api.Client refuse the same input with the same code.
type InProcess struct {
	eng   *engine.Engine
	sched *scheduler.Scheduler
}

var _ Client = (*InProcess)(nil)

// Local returns the Client of eng; sched serves the schedule methods and may be nil (they then
// answer X_NO_SCHEDULER, as an engine serving no scheduler does over HTTP).
func Local(eng *engine.Engine, sched *scheduler.Scheduler) *InProcess {
	return &InProcess{eng: eng, sched: sched}
}

// checkText checks text fields by the rule the HTTP client and server share (inputcheck.Fields).
func checkText(fields map[string]string) error {
	for field, v := range fields {
		if err := inputcheck.Fields(field, v); err != nil {
			return err
		}
	}
	return nil
}

// GetRun implements Reader.
func (c *InProcess) GetRun(ctx context.Context, runID string) (engine.RunView, error) {
	if err := checkRunID(runID); err != nil {
		return engine.RunView{}, err
	}
	return c.eng.InspectRun(ctx, runID)
}

func checkRunID(id string) error { return inputcheck.RunID(id) }

// ListRuns implements Reader.
func (c *InProcess) ListRuns(ctx context.Context, p store.ListParams) (engine.RunPage, error) {
	if err := paging.Cursor(p.Before); err != nil {
		return engine.RunPage{}, err
	}
	return c.eng.SearchRuns(ctx, engine.RunFilter{Queue: p.Queue, State: p.State, Job: p.Job, Tenant: p.Tenant,
		Before: p.Before, Limit: max(p.Limit, 0)})
}

// SearchRuns implements Reader.
func (c *InProcess) SearchRuns(ctx context.Context, f engine.RunFilter) (engine.RunPage, error) {
	if err := paging.Cursor(f.Before); err != nil {
		return engine.RunPage{}, err
	}
	f.Limit = max(f.Limit, 0)
	return c.eng.SearchRuns(ctx, f)
}

// DeadLetters implements Reader.
func (c *InProcess) DeadLetters(ctx context.Context, p store.ListParams) (engine.RunPage, error) {
	p.State = store.StateFailed
	return c.ListRuns(ctx, p)
}

// Queues implements Reader.
func (c *InProcess) Queues(ctx context.Context) ([]engine.QueueView, error) {
	qs, err := c.eng.InspectQueues(ctx)
	if qs == nil && err == nil {
		qs = []engine.QueueView{}
	}
	return qs, err
}

// Overview implements Reader.
func (c *InProcess) Overview(ctx context.Context, window, bucket time.Duration) (engine.Overview, error) {
	if err := inputcheck.Overview(window, bucket); err != nil {
		return engine.Overview{}, err
	}
	return c.eng.InspectOverview(ctx, window, bucket)
}

// Manifest implements Reader.
func (c *InProcess) Manifest(ctx context.Context, kind string) (engine.ManifestView, error) {
	if err := checkText(map[string]string{"kind": kind}); err != nil {
		return engine.ManifestView{}, err
	}
	if kind == "" {
		return c.eng.InspectManifest(ctx)
	}
	ds, err := c.eng.Declarations(ctx, kind)
	return engine.ManifestView{Declarations: ds, Workers: []engine.WorkerView{}}, err
}

// Backfills implements Reader.
func (c *InProcess) Backfills(ctx context.Context, f store.BackfillFilter) ([]backfill.Progress, error) {
	if err := checkText(map[string]string{"name": f.Name, "status": f.Status, "run": f.RunID, "tenant": f.Tenant}); err != nil {
		return nil, err
	}
	if f.Limit > paging.MaxBackfills {
		return nil, jobs.Errorf(jobs.CodeBadRequest, "limit %d: want 1 to %d", f.Limit, paging.MaxBackfills)
	}
	f.Limit = max(f.Limit, 0)
	return c.eng.InspectBackfills(ctx, f)
}

func (c *InProcess) scheduler() (*scheduler.Scheduler, error) {
	if c.sched == nil {
		return nil, jobs.Errorf(jobs.CodeNoScheduler, "this engine runs no scheduler")
	}
	return c.sched, nil
}

func checkSchedule(name string) error { return inputcheck.ScheduleName(name) }

// Schedules implements Reader.
func (c *InProcess) Schedules(ctx context.Context) ([]scheduler.Info, error) {
	sc, err := c.scheduler()
	if err != nil {
		return nil, err
	}
	all, err := sc.Inspect(ctx)
	if all == nil && err == nil {
		all = []scheduler.Info{}
	}
	return all, err
}

// Schedule implements Reader.
func (c *InProcess) Schedule(ctx context.Context, name string) (scheduler.Info, error) {
	sc, err := c.scheduler()
	if err != nil {
		return scheduler.Info{}, err
	}
	if err := checkSchedule(name); err != nil {
		return scheduler.Info{}, err
	}
	return sc.Get(ctx, name)
}

// DumpHistory implements Reader.
func (c *InProcess) DumpHistory(ctx context.Context, runID string, w io.Writer) error {
	if err := checkRunID(runID); err != nil {
		return err
	}
	// Streamed a page at a time (engine.HistoryPages), as the HTTP API streams it, so a dump of
	// a long run's history holds one page, not the history. The first page is read before
	// anything is written, so a run that is not found writes nothing. A failure after that
	// returns its error (a store's as it is, an event that cannot be written X_ENCODING, w's own)
	// with w holding a dump cut short: a dump is whole only when the error is nil.
	err := history.DumpPages(w, c.eng.HistoryPages(ctx, runID), history.DumpOptions{})
	var ee *history.EncodeError
	if errors.As(err, &ee) {
		return jobs.Wrap(jobs.CodeEncoding, err, "dump the history of run %s", runID)
	}
	return err
}

// WaitResult implements Reader.
func (c *InProcess) WaitResult(ctx context.Context, runID string) (engine.RunResult, error) {
	if err := checkRunID(runID); err != nil {
		return engine.RunResult{}, err
	}
	return c.eng.WaitResult(ctx, runID)
}

// Enqueue implements Actor.
func (c *InProcess) Enqueue(ctx context.Context, req jobs.EnqueueRequest) (jobs.EnqueueResult, error) {
	if err := checkText(map[string]string{"job": req.Job, "queue": req.Queue, "key": req.Key,
		"tenant": req.Tenant, "enqueuedBy": req.EnqueuedBy}); err != nil {
		return jobs.EnqueueResult{}, err
	}
	return c.eng.Enqueue(ctx, req)
}

// Publish implements Actor.
func (c *InProcess) Publish(ctx context.Context, name string, payload any) (signals.Published, error) {
	if err := checkText(map[string]string{"event name": name}); err != nil {
		return signals.Published{}, err
	}
	return c.eng.Publish(ctx, name, payload)
}

// Cancel implements Actor.
func (c *InProcess) Cancel(ctx context.Context, runID, reason string) (engine.RunSummary, error) {
	if err := checkRunID(runID); err != nil {
		return engine.RunSummary{}, err
	}
	if err := checkText(map[string]string{"reason": reason}); err != nil {
		return engine.RunSummary{}, err
	}
	run, err := c.eng.Cancel(ctx, runID, reason)
	if err != nil {
		return engine.RunSummary{}, err
	}
	return engine.Summarize(run), nil
}

// Retry implements Actor.
func (c *InProcess) Retry(ctx context.Context, req engine.RetryRequest) (engine.RunSummary, error) {
	if err := checkRunID(req.RunID); err != nil {
		return engine.RunSummary{}, err
	}
	if err := checkText(map[string]string{"fromStep": req.FromStep, "by": req.By, "reason": req.Reason}); err != nil {
		return engine.RunSummary{}, err
	}
	run, err := c.eng.Retry(ctx, req)
	if err != nil {
		return engine.RunSummary{}, err
	}
	return engine.Summarize(run), nil
}

func (c *InProcess) onSchedule(name string) (*scheduler.Scheduler, error) {
	sc, err := c.scheduler()
	if err != nil {
		return nil, err
	}
	return sc, checkSchedule(name)
}

// PauseSchedule implements Actor.
func (c *InProcess) PauseSchedule(ctx context.Context, name string) (scheduler.Info, error) {
	sc, err := c.onSchedule(name)
	if err != nil {
		return scheduler.Info{}, err
	}
	return sc.Pause(ctx, name)
}

// ResumeSchedule implements Actor.
func (c *InProcess) ResumeSchedule(ctx context.Context, name string) (scheduler.Info, error) {
	sc, err := c.onSchedule(name)
	if err != nil {
		return scheduler.Info{}, err
	}
	return sc.Resume(ctx, name)
}

// TriggerSchedule implements Actor.
func (c *InProcess) TriggerSchedule(ctx context.Context, name string) (jobs.EnqueueResult, error) {
	sc, err := c.onSchedule(name)
	if err != nil {
		return jobs.EnqueueResult{}, err
	}
	return sc.Trigger(ctx, name)
}
