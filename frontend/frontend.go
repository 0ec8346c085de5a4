// Package frontend is the one seam between a worker and the engine: poll for tasks, record a
// run's commands, renew leases, read history. The engine implements it in-process
// (engine.Engine) and the HTTP client implements it remotely (api.Client); a worker is written
// against this interface only, so it runs unchanged in either.
//
// Every type here crosses the wire as msgpack, so fields are plain data.
package frontend

import (
	"context"
	"time"

	"github.com/ultimat3/jobs/history"
)

// Frontend is what a worker needs of the engine.
type Frontend interface {
	Manifests // a worker's manifest (manifest.go)

	// Poll claims up to Max ready runs of the queues, waiting up to Wait for one to become ready
	// (a long-poll). It returns no tasks and no error when Wait passes with nothing to do.
	Poll(ctx context.Context, req PollRequest) ([]Task, error)
	// Record applies a running run's commands under its fence, in one store transaction shared
	// with other runs' records (group commit). A stale fence is refused with X_JOB_LEASE_LOST, a
	// cancelled run with X_ABORTED.
	Record(ctx context.Context, req RecordRequest) (RecordResponse, error)
	// Heartbeat renews the leases of the runs a worker holds, all in one call.
	Heartbeat(ctx context.Context, req HeartbeatRequest) (HeartbeatResponse, error)
	// History returns a run's events after afterSeq.
	History(ctx context.Context, runID string, afterSeq int64) ([]history.Event, error)

	Sessions
	// Backfills is a pass's ledger row (frontend/backfill.go).
	Backfills
}

// CheapClaims is what a Frontend may also implement to say that a claim costs its store no wait
// for a flush (a claim on Postgres commits asynchronously: store/postgres/epoch.go). A worker on
// such a frontend claims as its slots free instead of lingering for larger claims
// (worker/linger.go). A store says the same by the same method, and the engine passes it on.
type CheapClaims interface {
	CheapClaims() bool
}

// PollRequest asks for work.
type PollRequest struct {
	WorkerID string        `msgpack:"worker_id"`
	Queues   []string      `msgpack:"queues"`
	Max      int           `msgpack:"max"`
	Wait     time.Duration `msgpack:"wait"`
	// Limits maps a job name to its fleet-wide concurrency cap. The engine ignores it: the caps
	// it enforces are the ones the workers' manifests declare (a poll cannot raise, lower or
	// drop a cap). Kept so older workers' polls still decode.
	Limits map[string]int `msgpack:"limits,omitempty"`
}

// Task is a claimed run.
type Task struct {
	RunID      string    `msgpack:"run_id"`
	Job        string    `msgpack:"job"`
	Queue      string    `msgpack:"queue"`
	Fence      int64     `msgpack:"fence"`
	Attempt    int       `msgpack:"attempt"`
	Input      []byte    `msgpack:"input"`
	Key        string    `msgpack:"key"`
	Tenant     string    `msgpack:"tenant,omitempty"`
	NoTenant   bool      `msgpack:"no_tenant,omitempty"`
	EnqueuedBy string    `msgpack:"enqueued_by,omitempty"`
	LastSeq    int64     `msgpack:"last_seq"`
	LeaseUntil time.Time `msgpack:"lease_until"`
	// Lease is the visibility window a heartbeat renews; at least MinLease (a worker reads a
	// shorter one as MinLease).
	Lease time.Duration `msgpack:"lease"`
	// LeaseToken is the claim's secret: every record and heartbeat of this claim must present it
	// with the worker id it was issued to. It cannot be derived from anything the admin API shows.
	LeaseToken string `msgpack:"lease_token"`
	// TraceParent and TraceState are the W3C trace context the run was enqueued under: the
	// worker's attempt span is its child.
	TraceParent string `msgpack:"traceparent,omitempty"`
	TraceState  string `msgpack:"tracestate,omitempty"`
	// Tail is the end of the run's history when the engine knows it without a read: what the
	// run's last wake-up appended (a fired timer's event, a delivered event), its last seq
	// LastSeq. A worker that keeps the run parked at Tail[0].Seq−1 resumes it from Tail; any
	// other worker reads the history as it would without it. Empty when the engine does not
	// know it.
	Tail []history.Event `msgpack:"tail,omitempty"`
}

// CommandKind names a worker command.
type CommandKind string

const (
	// CmdStep records a completed step (Name, Output). The run stays running.
	CmdStep CommandKind = "step"
	// CmdStepFailed records a failed step the body went on past (Name, Code, Error): replay
	// returns the failure instead of running the step again. The run stays running, and the name
	// stays free for another try.
	CmdStepFailed CommandKind = "step-failed"
	// CmdSleep suspends the run until WakeAt (Name).
	CmdSleep CommandKind = "sleep"
	// CmdWait suspends the run until an event named Event matching Match is published, or
	// TimeoutAt. It may be satisfied at once from the lookback window: the response then ends
	// with EventReceived and the run stays running.
	CmdWait CommandKind = "wait"
	// CmdComplete completes the run with Output as its result.
	CmdComplete CommandKind = "complete"
	// CmdFail records a failed attempt: retried at RetryAt, or dead-lettered when Stop is set.
	CmdFail CommandKind = "fail"
	// CmdBlock blocks the run (Code, Error): its code no longer replays its history.
	CmdBlock CommandKind = "block"
	// CmdRelease hands the claim back without spending an attempt (over a limit), ready again
	// at ReadyAt.
	CmdRelease CommandKind = "release"
	// CmdPublish publishes an event (Event, payload in Output) as the durable call Name; the run
	// stays running. See Effect.
	CmdPublish CommandKind = "publish"
	// CmdEnqueue enqueues a run of another job (Effect) as the durable call Name; the run stays
	// running. See Effect.
	CmdEnqueue CommandKind = "enqueue"
	// CmdVersion records the version (Version) a change point (Name) takes; the run stays
	// running.
	CmdVersion CommandKind = "version"
	// CmdAwaitChild suspends the run until its child run Effect.RunID finishes (Name is the
	// durable call). A child already finished answers at once: the response ends with
	// EventReceived and the run stays running.
	CmdAwaitChild CommandKind = "await-child"
)

// Command is one thing a run's execution asks of the engine.
type Command struct {
	Kind   CommandKind `msgpack:"kind"`
	Name   string      `msgpack:"name,omitempty"`
	Output []byte      `msgpack:"output,omitempty"`
	// Sleep.
	WakeAt time.Time `msgpack:"wake_at,omitempty"`
	// Wait.
	Event     string    `msgpack:"event,omitempty"`
	Match     []string  `msgpack:"match,omitempty"`
	TimeoutAt time.Time `msgpack:"timeout_at,omitempty"`
	// Lookback bounds the events published before the wait that may satisfy it (jobs.Lookback:
	// "" the engine's window, "since-run-start", "none").
	Lookback string `msgpack:"lookback,omitempty"`
	// Sticky: the worker keeps the suspended run parked and wants first call on its wake-up.
	Sticky bool `msgpack:"sticky,omitempty"`
	// Fail and block (Code and Error also a failed step's, and RetryAfter: the delay its error
	// named, jobs.Error.RetryAfter).
	RetryAfter time.Duration `msgpack:"retry_after,omitempty"`
	// Codes: a failed step's other codes, after Code (history.StepFailed).
	Codes   []string  `msgpack:"codes,omitempty"`
	Attempt int       `msgpack:"attempt,omitempty"`
	Code    string    `msgpack:"code,omitempty"`
	Error   string    `msgpack:"error,omitempty"`
	Step    string    `msgpack:"step,omitempty"`
	Stop    string    `msgpack:"stop,omitempty"`
	RetryAt time.Time `msgpack:"retry_at,omitempty"`
	// Release.
	ReadyAt time.Time `msgpack:"ready_at,omitempty"`
	// Publish and enqueue.
	Effect *Effect `msgpack:"effect,omitempty"`
	// Version: the version a change point records (CmdVersion).
	Version int `msgpack:"version,omitempty"`
	// Step: Parallel marks a step started with jobs.Go (see history.StepCompleted).
	Parallel bool `msgpack:"parallel,omitempty"`
	// Publish: Matched says Match holds the event's match fields (canonical pairs, as a wait's)
	// and the payload is not read, so it may be a codec envelope (jobs.PublishMatch).
	Matched bool `msgpack:"matched,omitempty"`
}

// RecordRequest carries one run's commands.
type RecordRequest struct {
	RunID    string `msgpack:"run_id"`
	Fence    int64  `msgpack:"fence"`
	WorkerID string `msgpack:"worker_id"`
	// LeaseToken is the claim's Task.LeaseToken.
	LeaseToken string `msgpack:"lease_token"`
	// AfterSeq is the last seq the worker knows. When a commit's outcome is unknown (the
	// connection dropped after COMMIT was sent), the engine reads the history after AfterSeq to
	// learn whether these commands landed, so a step is neither recorded twice nor lost.
	AfterSeq int64 `msgpack:"after_seq"`
	// Retry marks a resend of a record whose outcome the worker did not learn. The engine first
	// looks for its events after AfterSeq and returns them if they landed, so a resend never
	// appends twice.
	Retry bool `msgpack:"retry,omitempty"`
	// Slot is the concurrency slot the run holds, released when the commands take the run out
	// of running.
	Slot     string    `msgpack:"slot,omitempty"`
	Commands []Command `msgpack:"commands"`
}

// RecordResponse is what the commands appended.
type RecordResponse struct {
	Appended []history.Event `msgpack:"appended"`
	LastSeq  int64           `msgpack:"last_seq"`
	State    string          `msgpack:"state"`
}

// Lease is one held claim.
type Lease struct {
	RunID string `msgpack:"run_id"`
	Fence int64  `msgpack:"fence"`
	// Token is the claim's Task.LeaseToken.
	Token string `msgpack:"token"`
	// Slot and Limit name the fleet concurrency slot the run holds, renewed with the lease.
	Slot  string `msgpack:"slot,omitempty"`
	Limit int    `msgpack:"limit,omitempty"`
}

// SlotKey is the concurrency slot key of a job.
func SlotKey(job string) string { return "job:" + job }

// HeartbeatRequest renews leases.
type HeartbeatRequest struct {
	WorkerID string  `msgpack:"worker_id"`
	Leases   []Lease `msgpack:"leases"`
}

// HeartbeatResponse has one code per lease: "" renewed, X_ABORTED (cancelled),
// X_JOB_LEASE_LOST, X_JOB_SLOT_LOST, X_RUN_NOT_FOUND.
type HeartbeatResponse struct {
	Codes []string `msgpack:"codes"`
}

// How many items a request's arrays may carry: the engine refuses more before decoding them (a
// decoder makes a slice to the length an array's header claims, and an element of one byte
// decodes to a whole struct), and the worker never sends more.
const (
	// MaxRecordCommands bounds a record's commands: one for a step, one per parallel step that
	// finished while the run's previous record was in flight (more go in the next record).
	MaxRecordCommands = 1024
	// MaxHeartbeatLeases bounds a heartbeat's leases (a worker holding more sends several).
	MaxHeartbeatLeases = 1 << 14
	// MaxErrorText bounds the error text a failure (an attempt's, a failed step's, a block's)
	// keeps: the rest is cut, never refused, so the failure is not lost. The engine cuts what it
	// is sent; a worker cuts a failed step's before it queues it.
	MaxErrorText = 16 << 10
	// MaxFailureCodes bounds the codes a failed step records beside its first (history.StepFailed).
	MaxFailureCodes = 16
)
