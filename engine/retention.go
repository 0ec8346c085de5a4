package engine

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/store"
)

// Retention defaults. A week of finished runs is what an operator looks back over (last week's
// incident, a resend the dedupe window still answers) and bounds a busy deployment's tables to
// about seven days of its throughput. Dead letters are kept four times longer: each is a to-do
// for an operator who may still retry it, and a month is long enough to notice one; keeping them
// forever would let a steady failure rate grow the tables without bound.
const (
	DefaultRetention       = 7 * 24 * time.Hour
	DefaultFailedRetention = 30 * 24 * time.Hour
	// DefaultRetentionEvery is how often the sweeper runs: often enough that a sweep is small.
	DefaultRetentionEvery = 10 * time.Minute
	// DefaultRetentionBatch is the runs one batch (one short transaction) deletes.
	DefaultRetentionBatch = 500
	// retentionMaxBatches bounds one sweep; the next sweep goes on where it stopped.
	retentionMaxBatches = 1000
)

// RetentionConfig says how long finished runs and their histories are kept.
type RetentionConfig struct {
	// Completed is how long completed and cancelled runs are kept after they finished. 0:
	// DefaultRetention; < 0: forever (no sweeper runs when Failed is < 0 as well).
	Completed time.Duration
	// Failed is how long dead letters are kept after they failed. 0: DefaultFailedRetention;
	// < 0: until an operator retries them, forever.
	Failed time.Duration
	// Archive, when set, receives each run and its history before the run is deleted; a run
	// whose archive fails is not deleted.
	Archive Archive
	// Every is the sweeper's interval on the engine's clock. Defaults to DefaultRetentionEvery.
	Every time.Duration
	// Batch bounds one batch. Defaults to DefaultRetentionBatch, at most 10,000.
	Batch int
}

func (c RetentionConfig) withDefaults() RetentionConfig {
	if c.Completed == 0 {
		c.Completed = DefaultRetention
	}
	if c.Failed == 0 {
		c.Failed = DefaultFailedRetention
	}
	if c.Every <= 0 {
		c.Every = DefaultRetentionEvery
	}
	if c.Batch <= 0 {
		c.Batch = DefaultRetentionBatch
	}
	c.Batch = store.RetentionLimit(c.Batch)
	return c
}

// RetentionReport says what a sweep deleted, or, dry, what it would delete.
type RetentionReport struct {
	DryRun bool      `json:"dry_run"`
	Now    time.Time `json:"now"`
	// The cut-offs: runs finished before them go. Absent: that state is kept.
	CompletedBefore *time.Time `json:"completed_before,omitempty"`
	FailedBefore    *time.Time `json:"failed_before,omitempty"`
	CancelledBefore *time.Time `json:"cancelled_before,omitempty"`
	// Runs is how many runs were (would be) deleted, ByState by their state.
	Runs    int            `json:"runs"`
	ByState map[string]int `json:"by_state"`
	// Events is how many history events were deleted (0 on a dry run).
	Events   int64 `json:"events"`
	Archived int   `json:"archived"`
	Batches  int   `json:"batches"`
	// More is true when the sweep stopped at its bound (or, dry, the listing at 10,000) and
	// more runs are eligible.
	More bool `json:"more"`
	// Oldest lists the first eligible runs (dry run only), oldest finish first.
	Oldest   []RetainedRun `json:"oldest,omitempty"`
	Duration time.Duration `json:"duration_ns"`
}

// RetainedRun names one run a dry run would delete.
type RetainedRun struct {
	ID         string    `json:"id"`
	Job        string    `json:"job"`
	State      string    `json:"state"`
	FinishedAt time.Time `json:"finished_at"`
}

// retention is the sweeper's state and metrics.
type retention struct {
	cfg     RetentionConfig
	deleted *prometheus.CounterVec
	events  prometheus.Counter
	seconds prometheus.Histogram
}

func newRetention(cfg RetentionConfig) *retention {
	return &retention{cfg: cfg.withDefaults(),
		deleted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "jobs_retention_deleted_runs_total",
			Help: "Finished runs deleted by retention, by the state they finished in."}, []string{"state"}),
		events: prometheus.NewCounter(prometheus.CounterOpts{Name: "jobs_retention_deleted_events_total",
			Help: "History events deleted with their runs by retention."}),
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "jobs_retention_sweep_seconds",
			Help:    "Time one retention sweep took, all its batches.",
			Buckets: prometheus.ExponentialBucketsRange(0.001, 600, 16)}),
	}
}

// params are the store's cut-offs at now.
func (e *Engine) retentionParams(now time.Time, limit int) store.RetentionParams {
	c := e.retention.cfg
	p := store.RetentionParams{Limit: limit}
	if c.Completed > 0 {
		p.CompletedBefore = now.Add(-c.Completed)
		p.CancelledBefore = p.CompletedBefore
	}
	if c.Failed > 0 {
		p.FailedBefore = now.Add(-c.Failed)
	}
	keep := e.cfg.DedupeRetention
	if keep <= 0 {
		keep = DefaultDedupeRetention
	}
	p.DedupeFrom = now.Add(-keep)
	return p
}

func cutoff(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// SweepRetention deletes the finished runs past their retention now, in batches of one short
// transaction each, archiving each batch first when an Archive is configured. dryRun deletes
// nothing and lists what would go. The sweeper calls it on its interval; `engine retention run`
// calls it through the admin API.
func (e *Engine) SweepRetention(ctx context.Context, dryRun bool) (RetentionReport, error) {
	start := time.Now() // the sweep's duration is a measurement, not a decision: wall clock
	now := e.clock.Now()
	c := e.retention.cfg
	rep := RetentionReport{DryRun: dryRun, Now: now, ByState: map[string]int{}}
	if dryRun {
		p := e.retentionParams(now, 10_000)
		rep.CompletedBefore, rep.FailedBefore, rep.CancelledBefore = cutoff(p.CompletedBefore), cutoff(p.FailedBefore), cutoff(p.CancelledBefore)
		if p.CompletedBefore.IsZero() && p.FailedBefore.IsZero() {
			return rep, nil
		}
		runs, err := e.store.RetentionCandidates(ctx, p)
		if err != nil {
			return rep, err
		}
		rep.Runs, rep.More = len(runs), len(runs) == 10_000
		for i, r := range runs {
			rep.ByState[string(r.State)]++
			if i < 20 {
				rep.Oldest = append(rep.Oldest, RetainedRun{ID: r.ID, Job: r.Job, State: string(r.State), FinishedAt: r.FinishedAt})
			}
		}
		rep.Duration = time.Since(start)
		return rep, nil
	}
	p := e.retentionParams(now, c.Batch)
	rep.CompletedBefore, rep.FailedBefore, rep.CancelledBefore = cutoff(p.CompletedBefore), cutoff(p.FailedBefore), cutoff(p.CancelledBefore)
	if p.CompletedBefore.IsZero() && p.FailedBefore.IsZero() {
		return rep, nil
	}
	defer func() {
		rep.Duration = time.Since(start)
		e.retention.seconds.Observe(rep.Duration.Seconds())
	}()
	stuck := "" // the first run of the last batch that deleted nothing
	// A run whose archive failed is kept (it is never deleted unarchived), and skipped for the
	// rest of this sweep; the next sweep tries it again. The runs archived around it are still
	// deleted: stopping the whole batch archived them again on every sweep (a stream archive
	// held each once per sweep), and a run that can never be archived, first in every listing,
	// stopped retention for good. The first failure is the sweep's error, once it is done.
	failed := map[string]bool{}
	var archiveErr error
	for rep.Batches < retentionMaxBatches {
		if err := ctx.Err(); err != nil {
			return rep, jobs.Wrap(jobs.CodeStoreUnavailable, err, "retention sweep")
		}
		// Listed past the runs skipped: they are still eligible, so they head the listing.
		lp := p
		lp.Limit = store.RetentionLimit(c.Batch + len(failed))
		listed, err := e.store.RetentionCandidates(ctx, lp)
		if err != nil {
			return rep, err
		}
		short := len(listed) < lp.Limit
		runs := make([]store.Run, 0, len(listed))
		for _, r := range listed {
			if !failed[r.ID] && len(runs) < c.Batch {
				runs = append(runs, r)
			}
		}
		if len(runs) == 0 {
			rep.More = !short
			return rep, archiveErr
		}
		ids := make([]string, 0, len(runs))
		kept := make([]store.Run, 0, len(runs))
		state := make(map[string]store.State, len(runs))
		for _, r := range runs {
			if c.Archive != nil {
				evs, err := e.store.HistoryRead(ctx, r.ID, 0, 0)
				if jobs.CodeOf(err) == jobs.CodeRunNotFound {
					continue // another engine's sweep took it
				}
				if err == nil {
					err = c.Archive.ArchiveRun(ctx, r, evs)
				}
				if err != nil {
					failed[r.ID] = true
					if archiveErr == nil {
						archiveErr = jobs.Wrap(jobs.CodeStoreUnavailable, err, "retention: archive run %s", r.ID)
					}
					continue
				}
				rep.Archived++
			}
			ids = append(ids, r.ID)
			kept = append(kept, r)
			state[r.ID] = r.State
		}
		rep.Batches++
		if len(ids) == 0 {
			if allFailed(runs, failed) {
				// Not one run of the batch could be archived: the archive itself is down (a
				// full disk). Trying batch after batch would only fail the same way.
				rep.More = true
				return rep, archiveErr
			}
			continue // every run of the batch vanished while it was archived: list again
		}
		e.settlePassesOf(ctx, kept)
		res, err := e.store.RetentionDelete(ctx, p, ids)
		if err != nil {
			return rep, err
		}
		for _, id := range res.Runs {
			rep.ByState[string(state[id])]++
			e.retention.deleted.WithLabelValues(string(state[id])).Inc()
		}
		rep.Runs += len(res.Runs)
		rep.Events += res.Events
		e.retention.events.Add(float64(res.Events))
		if short {
			return rep, archiveErr
		}
		if len(res.Runs) == 0 {
			// None deleted: another sweep (another engine) took them, or holds them locked, or
			// they changed. If the next listing starts with the same run, they are stuck for
			// now: leave them to the next sweep rather than spin on them.
			if stuck == ids[0] {
				rep.More = true
				return rep, archiveErr
			}
			stuck = ids[0]
		} else {
			stuck = ""
		}
	}
	rep.More = true
	return rep, archiveErr
}

// allFailed reports whether the archive of every one of runs failed.
func allFailed(runs []store.Run, failed map[string]bool) bool {
	for _, r := range runs {
		if !failed[r.ID] {
			return false
		}
	}
	return true
}

// retentionLoop sweeps on the engine's clock every Every, the first time one interval after the
// start (a restart loop must not sweep on every start).
func (e *Engine) retentionLoop(ctx context.Context) {
	c := e.retention.cfg
	if c.Completed < 0 && c.Failed < 0 {
		return
	}
	for {
		t := e.clock.NewTimer(c.Every)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		rep, err := e.SweepRetention(ctx, false)
		switch {
		case err != nil && ctx.Err() == nil:
			e.log.Warn("jobs.retention.sweep-failed", "err", err, "deleted", rep.Runs)
		case rep.Runs > 0:
			e.log.Info("jobs.retention.swept", "runs", rep.Runs, "events", rep.Events,
				"archived", rep.Archived, "batches", rep.Batches, "more", rep.More, "took", rep.Duration)
		}
	}
}

// settlePassesOf writes the running ledger rows of runs about to be deleted as their runs ended
// (settleFromRun): once a run is gone, all a read can say of its pass is that it never recorded
// its end, and a completed pass would turn failed, its name pending again, a gate that passed
// closed. The ledger holds few running rows (the passes in flight): one read per batch.
func (e *Engine) settlePassesOf(ctx context.Context, runs []store.Run) {
	rows, err := e.store.BackfillList(ctx, store.BackfillFilter{Status: store.BackfillRunning, Limit: maxLedgerScan})
	if err != nil {
		e.log.Warn("jobs.backfill.settle-failed", "err", err)
		return
	}
	if len(rows) == 0 {
		return
	}
	byID := make(map[string]store.Run, len(runs))
	for _, r := range runs {
		byID[r.ID] = r
	}
	for _, row := range rows {
		if run, ok := byID[row.RunID]; ok {
			e.settleFromRun(ctx, row, run)
		}
	}
}
