package engine

import (
	"context"
	"encoding/json"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
)

// The projections below answer one operator question each. The JSON API, the CLI (--json) and
// the /_x pages all render these, so no two surfaces can report different numbers.

// RunSummary is a run in a listing.
type RunSummary struct {
	ID         string      `json:"id"`
	Job        string      `json:"job"`
	Queue      string      `json:"queue"`
	State      store.State `json:"state"`
	Attempt    int         `json:"attempt"`
	Key        string      `json:"key"`
	Tenant     string      `json:"tenant,omitempty"`
	ErrorCode  string      `json:"errorCode,omitempty"`
	Error      string      `json:"error,omitempty"`
	StopReason string      `json:"stopReason,omitempty"`
	CreatedAt  time.Time   `json:"createdAt"`
	UpdatedAt  time.Time   `json:"updatedAt"`
	FinishedAt *time.Time  `json:"finishedAt,omitempty"`
}

// RunView is one run with its per-step trace and its failed attempts.
type RunView struct {
	RunSummary
	EnqueuedBy string          `json:"enqueuedBy,omitempty"`
	Fence      int64           `json:"fence"`
	WorkerID   string          `json:"workerId,omitempty"`
	LastSeq    int64           `json:"lastSeq"`
	Input      json.RawMessage `json:"input"`
	Result     json.RawMessage `json:"result,omitempty"`
	Steps      []StepView      `json:"steps"`
	Attempts   []AttemptView   `json:"attempts"`
	Retries    []RetryView     `json:"retries,omitempty"`
	// Waiting says why a ready or delayed run is not being claimed, when the manifest explains
	// it: no worker declared its job, or none still alive does (manifest.go).
	Waiting string `json:"waiting,omitempty"`
	// WaitingScoped is Waiting as a caller scoped to the run's tenant may read it, who may not
	// read the fleet's manifest: it names the run's own job and queue only (waitingReason). The
	// API answers such a caller with it in place of Waiting; it is never encoded itself.
	WaitingScoped string `json:"-"`
	// Family links the run to its parent and children (children.go).
	Family
	// TraceID is the trace the run was enqueued under, and TraceParent its full W3C context
	// (the enqueuer's span): look the run's attempts up in the tracing backend by it.
	TraceID     string `json:"traceId,omitempty"`
	TraceParent string `json:"traceparent,omitempty"`
	// DueAt is when a delayed run becomes ready: its enqueue's delay, or its failed attempt's
	// retry time. Absent for a run that is not delayed, or whose time is not known (a worker
	// handed the claim back for later).
	DueAt *time.Time `json:"dueAt,omitempty"`
}

// StepView is one durable call of a run's trace.
type StepView struct {
	Seq    int64      `json:"seq"`
	Kind   string     `json:"kind"` // step | sleep | wait
	Name   string     `json:"name"`
	Status string     `json:"status"` // completed | failed | sleeping | woke | waiting | received | timed-out | cancelled | discarded
	At     time.Time  `json:"at"`
	Ended  *time.Time `json:"endedAt,omitempty"`
	WakeAt *time.Time `json:"wakeAt,omitempty"`
	// LateSeconds is how long after its due time a sleep actually woke (an engine that was
	// down, a backlog of timers); absent when it woke on time or the history predates the
	// due time being recorded.
	LateSeconds float64         `json:"lateSeconds,omitempty"`
	Event       string          `json:"event,omitempty"`
	Output      json.RawMessage `json:"output,omitempty"`
	// Note says why a call ended without finishing: the cancel's reason for a sleep or wait,
	// the error of a failed step the body went on past.
	Note string `json:"note,omitempty"`
}

// AttemptView is one failed attempt.
type AttemptView struct {
	Attempt int        `json:"attempt"`
	Code    string     `json:"code,omitempty"`
	Error   string     `json:"error"`
	Step    string     `json:"step,omitempty"`
	Stop    string     `json:"stop,omitempty"`
	At      time.Time  `json:"at"`
	RetryAt *time.Time `json:"retryAt,omitempty"`
}

// RetryView is an operator's retry, the audit trail of who re-ran what and why.
type RetryView struct {
	At       time.Time `json:"at"`
	FromStep string    `json:"fromStep,omitempty"`
	By       string    `json:"by,omitempty"`
	Reason   string    `json:"reason,omitempty"`
}

// QueueView is one queue's depth.
type QueueView struct {
	Queue  string              `json:"queue"`
	Counts map[store.State]int `json:"counts"`
	// OldestReadySeconds is the age of the oldest ready run: "page if the oldest job in payments
	// is older than 5 minutes".
	OldestReadySeconds float64 `json:"oldestReadySeconds"`
	Dead               int     `json:"dead"`
}

// Summarize projects a run row.
func Summarize(r store.Run) RunSummary {
	s := RunSummary{ID: r.ID, Job: r.Job, Queue: r.Queue, State: r.State, Attempt: r.Attempt, Key: r.Key,
		Tenant: r.Tenant, ErrorCode: r.ErrorCode, Error: r.Error, StopReason: r.StopReason,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	if !r.FinishedAt.IsZero() {
		t := r.FinishedAt
		s.FinishedAt = &t
	}
	return s
}

// InspectRun returns a run with its per-step trace.
func (e *Engine) InspectRun(ctx context.Context, id string) (RunView, error) {
	run, err := e.store.RunGet(ctx, id)
	if err != nil {
		return RunView{}, err
	}
	events, err := e.store.HistoryRead(ctx, id, 0, 0)
	if err != nil {
		return RunView{}, err
	}
	v := RunView{RunSummary: Summarize(run), EnqueuedBy: run.EnqueuedBy, Fence: run.Fence, WorkerID: run.WorkerID,
		LastSeq: run.LastSeq, Steps: []StepView{}, Attempts: []AttemptView{}}
	v.Input = renderJSON(run.Input)
	v.Waiting, v.WaitingScoped = e.waitingReason(ctx, run)
	if v.Family, err = e.family(ctx, id); err != nil {
		return RunView{}, err
	}
	v.TraceParent, v.TraceID = run.TraceParent, traceID(run.TraceParent)
	if run.State == store.StateCompleted {
		v.Result = renderJSON(run.Result)
	}
	var due time.Time // the latest known time the run was delayed to
	if run.ReadyAt.After(run.CreatedAt) {
		due = run.ReadyAt // an enqueue's delay (the row's ReadyAt is set to it at create)
	}
	find := func(kind, name string) *StepView {
		for i := len(v.Steps) - 1; i >= 0; i-- {
			if v.Steps[i].Kind == kind && v.Steps[i].Name == name {
				return &v.Steps[i]
			}
		}
		return nil
	}
	for _, ev := range events {
		p, err := ev.Decode()
		if err != nil {
			return RunView{}, err
		}
		at := ev.At
		switch x := p.(type) {
		case history.StepCompleted:
			v.Steps = append(v.Steps, StepView{Seq: ev.Seq, Kind: "step", Name: x.StepName, Status: "completed", At: at, Ended: &at, Output: renderJSON(x.Output)})
		case history.StepFailed:
			v.Steps = append(v.Steps, StepView{Seq: ev.Seq, Kind: "step", Name: x.StepName, Status: "failed", At: at, Ended: &at, Note: x.Error})
		case history.TimerStarted:
			wake := x.WakeAt
			v.Steps = append(v.Steps, StepView{Seq: ev.Seq, Kind: "sleep", Name: x.TimerName, Status: "sleeping", At: at, WakeAt: &wake})
		case history.TimerFired:
			if s := find("sleep", x.TimerName); s != nil {
				s.Status, s.Ended = "woke", &at
				if !x.DueAt.IsZero() && at.After(x.DueAt) {
					s.LateSeconds = at.Sub(x.DueAt).Seconds()
				}
			}
		case history.EventWaitStarted:
			v.Steps = append(v.Steps, StepView{Seq: ev.Seq, Kind: "wait", Name: x.WaitName, Status: "waiting", At: at, Event: x.Event})
		case history.EventReceived:
			if s := find("wait", x.WaitName); s != nil {
				s.Status, s.Ended, s.Output = "received", &at, renderView(history.ReceivedView(x.EventID, x.Payload, nil))
			}
		case history.EventWaitTimedOut:
			if s := find("wait", x.WaitName); s != nil {
				s.Status, s.Ended = "timed-out", &at
			}
		case history.EventPublished:
			v.Steps = append(v.Steps, StepView{Seq: ev.Seq, Kind: "publish", Name: x.CallName, Status: "published", At: at, Ended: &at, Event: x.Event})
		case history.ChildEnqueued:
			kind := "enqueue"
			if x.Child {
				kind = "child"
			}
			v.Steps = append(v.Steps, StepView{Seq: ev.Seq, Kind: kind, Name: x.CallName, Status: "enqueued", At: at, Ended: &at,
				Output: renderJSON(mustEncode(map[string]string{"job": x.Job, "key": x.Key, "runId": x.RunID}))})
		case history.AttemptFailed:
			a := AttemptView{Attempt: x.Attempt, Code: x.Code, Error: x.Error, Step: x.Step, Stop: x.Stop, At: at}
			if !x.RetryAt.IsZero() {
				r := x.RetryAt
				a.RetryAt = &r
				due = r
			}
			v.Attempts = append(v.Attempts, a)
		case history.RunCancelled:
			// A sleep or wait the cancel cut short is not still sleeping or waiting.
			for i := range v.Steps {
				if s := &v.Steps[i]; s.Ended == nil && (s.Status == "sleeping" || s.Status == "waiting") {
					s.Status, s.Ended, s.Note = "cancelled", &at, "cancelled: "+x.Reason
				}
			}
		case history.RunRetried:
			v.Retries = append(v.Retries, RetryView{At: at, FromStep: x.FromStep, By: x.By, Reason: x.Reason})
			if x.FromSeq > 0 {
				for i := range v.Steps {
					if v.Steps[i].Seq >= x.FromSeq {
						v.Steps[i].Status = "discarded"
					}
				}
			}
		}
	}
	// A time already past for a run still delayed is not its due time (a hand-back for later
	// leaves none in the history): say nothing rather than something stale.
	if run.State == store.StateDelayed && due.After(e.clock.Now()) {
		v.DueAt = &due
	}
	return v, nil
}

// InspectQueues returns every queue's depth by state.
func (e *Engine) InspectQueues(ctx context.Context) ([]QueueView, error) {
	stats, err := e.store.QueueStats(ctx)
	if err != nil {
		return nil, err
	}
	now := e.clock.Now()
	out := make([]QueueView, 0, len(stats))
	for _, s := range stats {
		q := QueueView{Queue: s.Queue, Counts: s.Counts, Dead: s.Counts[store.StateFailed]}
		if q.Counts == nil {
			q.Counts = map[store.State]int{}
		}
		if !s.OldestReady.IsZero() {
			q.OldestReadySeconds = now.Sub(s.OldestReady).Seconds()
		}
		out = append(out, q)
	}
	return out, nil
}

// InspectDeadLetters lists dead-lettered runs, newest first.
func (e *Engine) InspectDeadLetters(ctx context.Context, p store.ListParams) ([]RunSummary, error) {
	p.State = store.StateFailed
	runs, err := e.store.RunSearch(ctx, store.RunQuery{ListParams: p})
	if err != nil {
		return nil, err
	}
	out := make([]RunSummary, len(runs))
	for i, r := range runs {
		out[i] = Summarize(r)
	}
	return out, nil
}

// renderJSON shows a stored value as JSON; a value that will not render shows as null rather
// than failing the whole view.
func renderJSON(b []byte) json.RawMessage {
	out, err := jobs.ToJSON(b)
	if err != nil {
		return json.RawMessage("null")
	}
	return out
}

// renderView is renderJSON of a value history already rendered: a received payload, which may
// be a child's outcome carrying its sealed result (history.ReceivedView).
func renderView(v any, err error) json.RawMessage {
	if err != nil {
		return json.RawMessage("null")
	}
	out, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage("null")
	}
	return out
}
