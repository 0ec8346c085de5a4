package engine

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
)

// RunResult is a finished run's outcome: what WaitResult answers, in-process and over HTTP.
type RunResult struct {
	RunID string      `json:"runId" msgpack:"run_id"`
	State store.State `json:"state" msgpack:"state"`
	// Done is false only in one long-poll's answer over HTTP, when the run had not finished
	// within the poll's wait; WaitResult itself never returns it false without an error.
	Done bool `json:"done" msgpack:"done"`
	// Result is the completed run's result, msgpack-encoded as the job returned it (Decode).
	Result []byte `json:"-" msgpack:"result,omitempty"`
	// ResultJSON is Result shown as JSON, for people and JSON callers.
	ResultJSON json.RawMessage `json:"result,omitempty" msgpack:"result_json,omitempty"`
	// Error is the run's error when it failed (its own code, e.g. X_JOB_MAX_ATTEMPTS or an
	// application's) or X_RUN_CANCELLED when it was cancelled.
	Error *jobs.Error `json:"error,omitempty" msgpack:"error,omitempty"`
}

// Decode decodes the run's result into out (jobs.Decode). A run that did not complete returns
// its error.
func (r RunResult) Decode(out any) error {
	if r.Error != nil {
		return r.Error
	}
	if r.State != store.StateCompleted {
		return jobs.Errorf(jobs.CodeInvariant, "run %s is %s, it has no result", r.RunID, r.State)
	}
	return jobs.Decode(r.Result, out)
}

// Terminal reports whether a run in state s can change no more on its own: completed, failed
// (dead-lettered) or cancelled. A blocked run waits for a retry, so it is not terminal.
func Terminal(s store.State) bool {
	return s == store.StateCompleted || s == store.StateFailed || s == store.StateCancelled
}

// ResultOf projects a run row to its outcome (Done false while it is not terminal).
func ResultOf(r store.Run) RunResult {
	out := RunResult{RunID: r.ID, State: r.State, Done: Terminal(r.State)}
	switch r.State {
	case store.StateCompleted:
		out.Result, out.ResultJSON = r.Result, renderJSON(r.Result)
	case store.StateFailed:
		code := jobs.Code(r.ErrorCode)
		if code == "" {
			code = jobs.CodeJobMaxAttempts
		}
		// The stored text is usually the attempt's error as its worker printed it, "CODE: …":
		// the code is not said twice.
		out.Error = &jobs.Error{Code: code, Message: strings.TrimPrefix(r.Error, string(code)+": ")}
	case store.StateCancelled:
		msg := "run " + r.ID + " was cancelled"
		if r.StopReason != "" {
			msg += ": " + r.StopReason
		}
		out.Error = jobs.Errorf(jobs.CodeRunCancelled, "%s", msg)
	}
	return out
}

// WaitResult blocks until the run is terminal or ctx ends, and returns its outcome: a
// completed run's result (RunResult.Decode), or a failed or cancelled run's outcome together
// with its error. A run that does not exist is X_RUN_NOT_FOUND at once.
//
// A run finished by this engine wakes the wait at once (finished rings a bell on every
// terminal commit); a run finished by another engine sharing the store is seen by reading it
// again, backing off from 10ms to Config.PollFallback. The backoff uses the engine's clock, so
// on a fake clock only the first kind of wake-up happens until the clock is advanced.
func (e *Engine) WaitResult(ctx context.Context, runID string) (RunResult, error) {
	if err := jobs.ValidIdentifier("run id", runID); err != nil {
		return RunResult{}, err
	}
	ceiling := e.cfg.PollFallback
	if ceiling <= 0 {
		ceiling = time.Second
	}
	backoff := 10 * time.Millisecond
	for {
		// Subscribed before the read, so a finish between the read and the wait still rings.
		rang := e.finished.wait()
		run, err := e.store.RunGet(ctx, runID)
		if err != nil {
			return RunResult{}, err
		}
		if run.State == store.StateCancelled && run.StopReason == "" {
			// The row does not keep a cancel's reason; its history does.
			run.StopReason = e.cancelReason(ctx, runID)
		}
		if res := ResultOf(run); res.Done {
			if res.Error != nil {
				return res, res.Error
			}
			return res, nil
		}
		t := e.clock.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ResultOf(run), ctx.Err()
		case <-rang:
		case <-t.C():
		}
		t.Stop()
		backoff = min(backoff*2, ceiling)
	}
}

// bell wakes every waiter at once: wait returns a channel closed by the next ring.
type bell struct {
	mu sync.Mutex
	ch chan struct{}
}

func (b *bell) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

func (b *bell) ring() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
}

// settled is told of every run a commit or a cancel left in state s.
func (e *Engine) settled(s store.State) {
	if Terminal(s) {
		e.finished.ring()
	}
}

// cancelReason is the reason the run's RunCancelled event names, or "" when it names none (or
// the history cannot be read: the reason only enriches the message).
func (e *Engine) cancelReason(ctx context.Context, runID string) string {
	events, err := e.store.HistoryRead(ctx, runID, 0, 0)
	if err != nil {
		return ""
	}
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].Kind == history.KindRunCancelled {
			if p, err := events[i].Decode(); err == nil {
				if c, ok := p.(history.RunCancelled); ok {
					return c.Reason
				}
			}
			return ""
		}
	}
	return ""
}
