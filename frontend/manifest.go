package frontend

import (
	"context"
	"time"

	"github.com/ultimat3/jobs"
)

// Manifests is how a worker declares what it hosts. The engine persists each worker's manifest
// and enforces from it: which jobs may be enqueued and on which queue, which queues the worker
// may poll, the fleet concurrency caps and the attempts of each job.
type Manifests interface {
	// DeclareManifest sends the worker's manifest. A worker sends it before its first poll,
	// then every ManifestResponse.Resend and after a reconnect; each one replaces the last.
	DeclareManifest(ctx context.Context, m Manifest) (ManifestResponse, error)
}

// Manifest is what one worker hosts.
type Manifest struct {
	WorkerID string `msgpack:"worker_id"`
	// Queues are the queues the worker polls.
	Queues       []string           `msgpack:"queues"`
	Declarations []jobs.Declaration `msgpack:"declarations"`
}

// ManifestResponse is the engine's answer to a manifest.
type ManifestResponse struct {
	// Resend is how often the engine wants the manifest again: a worker not heard from for
	// three times this long is no longer counted as hosting what it declared.
	Resend time.Duration `msgpack:"resend"`
}

// The protocol's floors for the intervals an engine hands its workers. A worker renews its
// leases every third of the lease and resends its manifest every Resend, so an answer of a
// nanosecond would spin both loops against the engine; an engine refuses a configuration
// below a floor, and a worker reads an answer below one as the floor. The two sides must agree:
// the engine's liveness rule (three Resends without a manifest) and its lease expiry assume the
// worker keeps the pace they name.
const (
	// MinLease is the shortest lease: renewals every 33 ms at most.
	MinLease = 100 * time.Millisecond
	// MinResend is the shortest manifest interval.
	MinResend = time.Second
)
