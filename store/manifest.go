package store

import (
	"context"
	"time"
)

// Declared is one declaration of a worker's manifest as the store keeps it: (Kind, Name,
// Checksum) is its identity, so two workers declaring one name differently are two rows. Data
// is JSON the store never looks inside.
type Declared struct {
	Kind     string
	Name     string
	Checksum string
	Data     []byte
}

// DeclaredBy is one worker declaring a declaration, and when it last did.
type DeclaredBy struct {
	WorkerID string
	LastSeen time.Time
}

// DeclarationRecord is a declaration with its history: when it was first and last declared,
// and the workers whose current manifest holds it (sorted by worker id; empty when none does).
type DeclarationRecord struct {
	Declared
	FirstSeen time.Time
	LastSeen  time.Time
	Workers   []DeclaredBy
}

// WorkerRecord is a worker that sent a manifest: the queues it polls and when it last sent one.
type WorkerRecord struct {
	ID       string
	Queues   []string
	LastSeen time.Time
}

// ManifestParams is one worker's manifest.
type ManifestParams struct {
	WorkerID string
	Queues   []string
	Declared []Declared
	Now      time.Time
}

// Manifests persist what the fleet's workers declared.
type Manifests interface {
	// ManifestPut records a worker's manifest in one transaction: the worker's row (its queues,
	// LastSeen Now); each declaration, stored once per (Kind, Name, Checksum) with FirstSeen
	// kept and LastSeen Now; the worker linked to each with LastSeen Now; and the worker's links
	// to declarations its manifest no longer holds removed. A declaration left with no worker is
	// kept: what a stopped worker declared is still known, with when it was last seen.
	ManifestPut(ctx context.Context, p ManifestParams) error

	// ManifestRead returns the declarations of kind ("" for every kind), sorted by kind, name
	// and checksum, and every worker, sorted by id.
	ManifestRead(ctx context.Context, kind string) ([]DeclarationRecord, []WorkerRecord, error)
}

// SlotHolder is implemented by a store that may be unable to hold fleet concurrency slots (one
// whose SlotAcquire cannot see every holder, say a replica or a cache). When HoldsSlots reports
// false, the engine refuses a manifest that declares a concurrency cap
// (X_JOB_CONCURRENCY_UNENFORCEABLE) rather than let a documented cap do nothing. The built-in
// stores hold slots and do not implement it.
type SlotHolder interface {
	HoldsSlots() bool
}
