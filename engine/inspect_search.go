package engine

import (
	"context"
	"slices"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/store"
)

// The projections below serve the operator's overview and run finder (the /_x pages, and any
// other surface that wants the same numbers). Like inspect.go, they compute every number once,
// here, from the store's indexed questions.

// MaxSearchPage bounds one page of SearchRuns.
const MaxSearchPage = 500

// RunFilter is a run finder's query. Empty fields do not filter.
type RunFilter struct {
	Queue  string      `json:"queue,omitempty"`
	State  store.State `json:"state,omitempty"`
	Job    string      `json:"job,omitempty"`
	Tenant string      `json:"tenant,omitempty"`
	// Search is a run id or an idempotency key: the run with that id (if any) comes first, then
	// the runs with that key, newest first.
	Search string `json:"search,omitempty"`
	// CreatedFrom and CreatedTo bound the creation time: From ≤ created < To.
	CreatedFrom time.Time `json:"createdFrom,omitzero"`
	CreatedTo   time.Time `json:"createdTo,omitzero"`
	// Before is the Next of the previous page: keyset paging by run id (newest first), so a
	// page deep into a large table costs what the first one does.
	Before string `json:"before,omitempty"`
	// Limit is the page size, 1 to MaxSearchPage; 0 means 50. A first page searched by a run's
	// id holds that run beside up to Limit runs of the key (Next pages through the key's runs
	// only), so it may hold Limit+1.
	Limit int `json:"limit,omitempty"`
}

// RunPage is one page of runs; Next, when set, is the Before of the following page.
type RunPage struct {
	Runs []RunSummary `json:"runs"`
	Next string       `json:"next,omitempty"`
}

// SearchRuns finds runs by f, newest first, one page at a time. A malformed filter is refused
// with X_BAD_REQUEST before the store is asked anything.
func (e *Engine) SearchRuns(ctx context.Context, f RunFilter) (RunPage, error) {
	for field, v := range map[string]string{"queue": f.Queue, "job": f.Job, "tenant": f.Tenant,
		"search": f.Search, "before": f.Before} {
		if err := jobs.ValidIdentifier(field, v); err != nil {
			return RunPage{}, err
		}
	}
	if f.State != "" && !slices.Contains(store.States, f.State) {
		return RunPage{}, jobs.Errorf(jobs.CodeBadRequest, "state %q is not one of %v", f.State, store.States)
	}
	switch {
	case f.Limit == 0:
		f.Limit = 50
	case f.Limit < 0 || f.Limit > MaxSearchPage:
		return RunPage{}, jobs.Errorf(jobs.CodeBadRequest, "limit %d: want 1 to %d", f.Limit, MaxSearchPage)
	}
	if !f.CreatedFrom.IsZero() && !f.CreatedTo.IsZero() && !f.CreatedFrom.Before(f.CreatedTo) {
		return RunPage{}, jobs.Errorf(jobs.CodeBadRequest, "created-from (%s) must be before created-to (%s)",
			f.CreatedFrom.Format(time.RFC3339), f.CreatedTo.Format(time.RFC3339))
	}
	q := store.RunQuery{ListParams: store.ListParams{Queue: f.Queue, State: f.State, Job: f.Job, Tenant: f.Tenant,
		Before: f.Before, Limit: f.Limit + 1}, Key: f.Search, CreatedFrom: f.CreatedFrom, CreatedTo: f.CreatedTo}
	var found []store.Run
	if f.Search != "" && f.Before == "" {
		// An id is unique: look it up directly (first page only), then the key's runs.
		r, err := e.store.RunGet(ctx, f.Search)
		switch {
		case err == nil && matchesFilter(r, q):
			found = append(found, r)
		case err != nil && jobs.CodeOf(err) != jobs.CodeRunNotFound:
			return RunPage{}, err
		}
	}
	runs, err := e.store.RunSearch(ctx, q)
	if err != nil {
		return RunPage{}, err
	}
	page := RunPage{Runs: make([]RunSummary, 0, len(found)+len(runs))}
	if len(runs) > f.Limit {
		runs = runs[:f.Limit]
		page.Next = runs[f.Limit-1].ID
	}
	for _, r := range found {
		page.Runs = append(page.Runs, Summarize(r))
	}
	for _, r := range runs {
		if len(found) > 0 && r.ID == found[0].ID {
			continue
		}
		page.Runs = append(page.Runs, Summarize(r))
	}
	return page, nil
}

// matchesFilter applies a query's filters (but the key, which an id search does not need) to a
// run found by id, so an id search within a filtered view stays within it.
func matchesFilter(r store.Run, q store.RunQuery) bool {
	switch {
	case q.Queue != "" && r.Queue != q.Queue,
		q.State != "" && r.State != q.State,
		q.Job != "" && r.Job != q.Job,
		q.Tenant != "" && r.Tenant != q.Tenant,
		!q.CreatedFrom.IsZero() && r.CreatedAt.Before(q.CreatedFrom),
		!q.CreatedTo.IsZero() && !r.CreatedAt.Before(q.CreatedTo):
		return false
	}
	return true
}

// ThroughputWindow is what Overview counts by default: the last 15 minutes, by minute.
const (
	ThroughputWindow = 15 * time.Minute
	ThroughputBucket = time.Minute
)

// Overview is the operator's first screen: every queue's depth and health, and how many runs
// finished in each recent bucket.
type Overview struct {
	At     time.Time      `json:"at"`
	Queues []QueueHealth  `json:"queues"`
	Totals map[string]int `json:"totals"` // by state, over every queue
}

// QueueHealth is a queue's depth (QueueView) with its recent throughput.
type QueueHealth struct {
	QueueView
	Running int `json:"running"`
	// Finished counts the runs that finished in each bucket, oldest first: Since is the first
	// bucket's start, Bucket each bucket's width.
	Since     time.Time        `json:"since"`
	BucketSec float64          `json:"bucketSeconds"`
	Finished  []FinishedBucket `json:"finished"`
	Window    map[string]int   `json:"window"` // finished in the whole window, by final state
	PerMinute float64          `json:"perMinute"`
}

// FinishedBucket is how many runs finished in one bucket, by final state.
type FinishedBucket struct {
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
	Cancelled int `json:"cancelled"`
}

// Total is the bucket's sum.
func (b FinishedBucket) Total() int { return b.Completed + b.Failed + b.Cancelled }

// InspectOverview returns every queue's depth, oldest ready age, dead letters and the runs that
// finished over the last window, in buckets of width (0: ThroughputWindow, ThroughputBucket).
func (e *Engine) InspectOverview(ctx context.Context, window, width time.Duration) (Overview, error) {
	if window == 0 {
		window = ThroughputWindow
	}
	if width == 0 {
		width = ThroughputBucket
	}
	if width <= 0 || window < width || window/width > 1440 {
		return Overview{}, jobs.Errorf(jobs.CodeBadRequest, "window %s in buckets of %s: want 1 to 1440 buckets", window, width)
	}
	queues, err := e.InspectQueues(ctx)
	if err != nil {
		return Overview{}, err
	}
	now := e.clock.Now()
	n := int(window / width)
	// The window ends with the bucket holding now, so the newest bucket fills as time passes.
	since := now.Truncate(width).Add(width).Add(-time.Duration(n) * width)
	counts, err := e.store.RunFinishedCounts(ctx, since, width)
	if err != nil {
		return Overview{}, err
	}
	ov := Overview{At: now, Queues: make([]QueueHealth, 0, len(queues)), Totals: map[string]int{}}
	index := map[string]int{}
	add := func(q QueueView) *QueueHealth {
		if i, ok := index[q.Queue]; ok {
			return &ov.Queues[i]
		}
		index[q.Queue] = len(ov.Queues)
		ov.Queues = append(ov.Queues, QueueHealth{QueueView: q, Running: q.Counts[store.StateRunning], Since: since,
			BucketSec: width.Seconds(), Finished: make([]FinishedBucket, n), Window: map[string]int{}})
		return &ov.Queues[len(ov.Queues)-1]
	}
	for _, q := range queues {
		add(q)
		for st, c := range q.Counts {
			ov.Totals[string(st)] += c
		}
	}
	for _, c := range counts {
		if c.Bucket < 0 || c.Bucket >= n {
			continue // finished "in the future" of this clock: another process's skew
		}
		q := add(QueueView{Queue: c.Queue, Counts: map[store.State]int{}})
		b := &q.Finished[c.Bucket]
		switch c.State {
		case store.StateCompleted:
			b.Completed += c.Count
		case store.StateFailed:
			b.Failed += c.Count
		case store.StateCancelled:
			b.Cancelled += c.Count
		}
		q.Window[string(c.State)] += c.Count
	}
	for i := range ov.Queues {
		q := &ov.Queues[i]
		q.PerMinute = float64(q.Window[string(store.StateCompleted)]+q.Window[string(store.StateFailed)]+
			q.Window[string(store.StateCancelled)]) / window.Minutes()
	}
	slices.SortFunc(ov.Queues, func(a, b QueueHealth) int {
		if a.Queue < b.Queue {
			return -1
		}
		if a.Queue > b.Queue {
			return 1
		}
		return 0
	})
	return ov, nil
}
