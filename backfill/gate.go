package backfill

import (
	"fmt"
	"strings"

	"github.com/ultimat3/jobs"
)

// Migration is what the application's migrations ledger says of a required migration.
type Migration int

const (
	// MigrationUnknown: the ledger could not be read (or none was named). It is not a refusal:
	// a requires that blocked on "I could not check" would make every backfill without a
	// readable ledger unrunnable.
	MigrationUnknown Migration = iota
	MigrationApplied
	MigrationPending
)

// GateInput is everything the gate decides on.
type GateInput struct {
	Declaration Declaration
	Environment string
	// Migration is the state of Declaration.Requires in the app's migrations ledger.
	Migration Migration
	// Completed is the newest completed pass of the name, when the ledger holds one: for a
	// per-tenant backfill, of the name and the tenant asked for (Progress.Tenant), since one
	// tenant's completed pass says nothing of another tenant's rows.
	Completed *Progress
	Force     bool
}

// Verdict is the gate's answer: Err is nil when the backfill may run.
type Verdict struct {
	Err *jobs.Error
}

// Run reports whether the backfill may run.
func (v Verdict) Run() bool { return v.Err == nil }

// Gate decides whether a named sweep may run here, now: one pure function, so the pass, the CLI
// and tests read the same verdict. It returns the refusal rather than failing with it, so
// `backfill --all` can go on to the next name.
//
// The order is the order an operator can act in: the environment first (nothing else matters if
// it may not run here at all), then the migration it waits on, then whether it already ran. A
// live pass is not judged here: the enqueue sees the one live idempotency key without racing.
func Gate(in GateInput) Verdict {
	d := in.Declaration
	if d.Excludes(in.Environment) {
		return Verdict{jobs.Errorf(jobs.CodeBackfillEnvironment, "backfill %q may not run in environment %q (declared: %s)",
			d.Name, in.Environment, strings.Join(d.Environments, ", "))}
	}
	if d.Requires != "" && in.Migration == MigrationPending {
		return Verdict{jobs.Errorf(jobs.CodeBackfillMigrationPending, "backfill %q requires migration %q, which is not applied",
			d.Name, d.Requires)}
	}
	if in.Completed != nil && !in.Force {
		at := in.Completed.CompletedAt
		if at.IsZero() {
			at = in.Completed.StartedAt
		}
		scope := ""
		if in.Completed.Tenant != "" {
			scope = fmt.Sprintf(" for tenant %q", in.Completed.Tenant)
		}
		return Verdict{jobs.Errorf(jobs.CodeBackfillApplied, "backfill %q already completed%s (run %s, %s); sweep again with force",
			d.Name, scope, in.Completed.RunID, at.UTC().Format("2006-01-02T15:04:05Z07:00"))}
	}
	return Verdict{}
}
