package frontend

import (
	"context"
	"time"
)

// Sessions tell the engine when a worker comes and goes, so what a gone worker held (its claims,
// its sticky reservations) is handed back at once instead of when its leases lapse.
type Sessions interface {
	// WorkerStart announces a worker. Whatever an earlier process left under the same id is
	// released: that process is gone. A new id supersedes nothing.
	WorkerStart(ctx context.Context, s Session) error
	// WorkerStop announces a clean stop: the claims the worker still holds and its sticky
	// reservations are released at once.
	WorkerStop(ctx context.Context, s Session) error
	// Attend holds the worker's session open until s.Wait passes (it returns nil: attend again),
	// ctx ends, or the engine drains. A remote engine that sees the session's connection drop
	// without a WorkerStop (the process was killed) releases what the worker held after a short
	// grace, unless the worker attends again first.
	Attend(ctx context.Context, s Session) error
}

// Session names a worker's session.
type Session struct {
	WorkerID string `msgpack:"worker_id"`
	// Wait is how long one Attend holds (the engine caps it).
	Wait time.Duration `msgpack:"wait,omitempty"`
}
