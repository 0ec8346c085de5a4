package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
)

// Bodies of the worker protocol (msgpack) that frontend does not already define: the requests
// of Poll, Record and Heartbeat are frontend's own types.

// PollResponse answers POST /v1/worker/poll.
type PollResponse struct {
	Tasks []frontend.Task `msgpack:"tasks"`
}

// HistoryRequest is the body of POST /v1/worker/history.
type HistoryRequest struct {
	RunID    string `msgpack:"run_id"`
	AfterSeq int64  `msgpack:"after_seq"`
}

// HistoryResponse answers POST /v1/worker/history.
type HistoryResponse struct {
	Events []history.Event `msgpack:"events"`
}

// Bodies of the admin API (JSON).

// EnqueueBody is the JSON body of POST /v1/runs. An untyped caller must name the idempotency
// key and either a tenant or noTenant: the engine cannot derive them from an input it does not
// know the type of.
type EnqueueBody struct {
	Job string `json:"job"`
	// Input is the job's input as JSON; it is stored as msgpack (jobs.FromJSON), so it decodes
	// into the same Go struct a typed enqueue would have sent.
	Input      json.RawMessage `json:"input,omitempty"`
	Key        string          `json:"key"`
	Tenant     string          `json:"tenant,omitempty"`
	NoTenant   bool            `json:"noTenant,omitempty"`
	Queue      string          `json:"queue,omitempty"`
	Delay      Duration        `json:"delay,omitempty"`
	EnqueuedBy string          `json:"enqueuedBy,omitempty"`
	// DedupeID: see jobs.EnqueueRequest.DedupeID. One beginning "call:" is refused
	// (X_BAD_REQUEST): that namespace is the engine's own, the ids of runs' durable enqueues and
	// child starts (checkEnqueue).
	DedupeID string `json:"dedupeId,omitempty"`
	// Priority: see jobs.EnqueueRequest.Priority.
	Priority int `json:"priority,omitempty"`
}

// request is the enqueue a JSON body asks for, its input turned to msgpack. POST /v1/runs and
// each item of POST /v1/runs/bulk both convert through here, so a field one of them reads
// cannot be dropped by the other (the bulk path once lost the priority, and with it the
// priority's range check). Checking the request is checkEnqueue's.
func (b EnqueueBody) request() (jobs.EnqueueRequest, error) {
	req := jobs.EnqueueRequest{Job: b.Job, Queue: b.Queue, Key: b.Key, Tenant: b.Tenant, NoTenant: b.NoTenant,
		EnqueuedBy: b.EnqueuedBy, Delay: time.Duration(b.Delay), DedupeID: b.DedupeID, Priority: b.Priority}
	if len(b.Input) > 0 {
		var err error
		if req.Input, err = jobs.FromJSON(b.Input); err != nil {
			return req, err
		}
	}
	return req, nil
}

// CancelBody is the JSON body of POST /v1/runs/{id}/cancel.
type CancelBody struct {
	Reason string `json:"reason,omitempty"`
}

// RetryBody is the JSON body of POST /v1/runs/{id}/retry.
type RetryBody struct {
	// FromStep re-runs the run from that step on; empty resumes where it stopped.
	FromStep string `json:"fromStep,omitempty"`
	By       string `json:"by,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// RetentionRunBody is the JSON body of POST /v1/retention/run: empty, or {} (the client's). It
// names no option: a dry run is GET /v1/retention. A body that is not one object, or that names
// a field, is refused with X_BAD_REQUEST before anything is swept, so that a caller who meant
// an option ({"dry_run":true}) is told, not answered with a real sweep.
type RetentionRunBody struct{}

// RunPage is a page of a listing, newest first. Next, when set, is the cursor of the next page:
// pass it as before=.
//
// It is engine.RunPage, so the HTTP client and the in-process engine answer a listing with one
// type (package client).
type RunPage = engine.RunPage

// QueueList answers GET /v1/queues.
type QueueList struct {
	Queues []engine.QueueView `json:"queues"`
}

// CodeList answers GET /v1/codes.
type CodeList struct {
	Codes []jobs.CodeInfo `json:"codes"`
}

// ErrorBody is every JSON refusal: {"error":{"code":"X_…","message":"…"}}.
type ErrorBody struct {
	Error *jobs.Error `json:"error"`
}

// Duration is a JSON duration: a Go duration string ("90s", "1h30m") or a number of seconds.
type Duration time.Duration

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		if s == "" {
			*d = 0
			return nil
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	if string(b) == "null" {
		return nil
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return fmt.Errorf("duration: want a string like \"90s\" or a number of seconds: %w", err)
	}
	// Beyond ±292 years a time.Duration overflows; refuse rather than wrap around.
	if secs > 9e9 || secs < -9e9 || secs != secs {
		return fmt.Errorf("duration %v seconds is out of range", secs)
	}
	*d = Duration(time.Duration(secs * float64(time.Second)))
	return nil
}

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }
