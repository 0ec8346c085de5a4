package engine

import (
	"context"
	"slices"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/backfill"
	"github.com/ultimat3/jobs/store"
)

// BackfillBoard is every declared backfill at a glance: its state in each environment the
// declarations name, its newest pass with live progress, and the ledger's recent passes. The
// console's backfills page renders it; it is built only from DeclaredBackfills, InspectBackfills
// and backfill.Pending, the projections `engine backfill --pending/--list` print, so the page
// and the CLI cannot disagree.
type BackfillBoard struct {
	// Environments are the board's columns: every environment a declaration names, plus the one
	// asked for. "" (when nothing names one) stands for any environment.
	Environments []string       `json:"environments"`
	Backfills    []BackfillLine `json:"backfills"`
	// Passes are the ledger's newest passes, newest first.
	Passes []BackfillPass `json:"passes"`
	// Orphaned names passes in the ledger whose backfill is no longer declared.
	Orphaned []string `json:"orphaned"`
}

// BackfillLine is one declared backfill.
type BackfillLine struct {
	backfill.Declaration
	// States has one entry per Environments column, in order.
	States []BackfillEnvState `json:"states"`
	// Latest is its newest pass; nil before any.
	Latest *BackfillPass `json:"latest,omitempty"`
	// LedgerChecksum is the newest pass's checksum when it differs from the declared one (a
	// changed definition warns, never refuses).
	LedgerChecksum string `json:"ledgerChecksum,omitempty"`
}

// BackfillEnvState is a backfill's state in one environment: pending, running, completed, failed
// or excluded (backfill.State*).
type BackfillEnvState struct {
	Environment string `json:"environment"`
	State       string `json:"state"`
	RunID       string `json:"runId,omitempty"`
}

// BackfillPass is one ledger row with what a person watching it reads.
type BackfillPass struct {
	backfill.Progress
	// Percent is the share of the counted rows done, when the pass counted (Total > 0).
	Percent *float64 `json:"percent,omitempty"`
	// CheckpointAge is how long ago the pass last reported a page (its last checkpoint).
	CheckpointAge time.Duration `json:"checkpointAge"`
}

// boardPasses bounds the passes the board lists.
const boardPasses = 100

// InspectBackfillBoard builds the board; env, when set, adds that environment's column.
func (e *Engine) InspectBackfillBoard(ctx context.Context, env string) (BackfillBoard, error) {
	if err := jobs.ValidIdentifier("environment", env); err != nil {
		return BackfillBoard{}, err
	}
	ds, err := e.DeclaredBackfills(ctx)
	if err != nil {
		return BackfillBoard{}, err
	}
	// The states from the ledger Pending judges (each declared name's newest and newest
	// completed passes, read per name), the list from the newest passes.
	ledger, err := e.pendingLedger(ctx, ds)
	if err != nil {
		return BackfillBoard{}, err
	}
	passes, err := e.InspectBackfills(ctx, store.BackfillFilter{Limit: boardPasses})
	if err != nil {
		return BackfillBoard{}, err
	}
	now := e.clock.Now()
	b := BackfillBoard{Backfills: []BackfillLine{}, Passes: []BackfillPass{}, Orphaned: []string{}}
	for _, d := range ds {
		for _, en := range d.Environments {
			if !slices.Contains(b.Environments, en) {
				b.Environments = append(b.Environments, en)
			}
		}
	}
	if env != "" && !slices.Contains(b.Environments, env) {
		b.Environments = append(b.Environments, env)
	}
	slices.Sort(b.Environments)
	if len(b.Environments) == 0 {
		b.Environments = []string{""}
	}
	for _, p := range passes {
		b.Passes = append(b.Passes, passOf(p, now))
	}
	newest := map[string]*BackfillPass{}
	for _, p := range ledger {
		if _, ok := newest[p.Name]; !ok {
			bp := passOf(p, now)
			newest[p.Name] = &bp
		}
	}
	// One report per column, from the one ledger read: backfill.Pending is the same function
	// PendingBackfills answers `backfill --pending` with.
	reports := make([]backfill.Report, len(b.Environments))
	for i, en := range b.Environments {
		reports[i] = backfill.Pending(ds, ledger, en)
	}
	byName := map[string]backfill.Declaration{}
	for _, d := range ds {
		if _, ok := byName[d.Name]; !ok {
			byName[d.Name] = d
		}
	}
	for i, row := range reports[0].Rows {
		line := BackfillLine{Declaration: byName[row.Name], Latest: newest[row.Name], LedgerChecksum: row.LedgerChecksum}
		for c, rep := range reports {
			r := rep.Rows[i]
			line.States = append(line.States, BackfillEnvState{Environment: b.Environments[c], State: r.State, RunID: r.RunID})
		}
		b.Backfills = append(b.Backfills, line)
	}
	b.Orphaned = reports[0].Orphaned
	return b, nil
}

// InspectBackfillPass returns the ledger row of a backfill pass's run, or nil when the run is
// not one (or its store keeps no ledger row for it): the run page shows it.
func (e *Engine) InspectBackfillPass(ctx context.Context, runID string) (*BackfillPass, error) {
	ps, err := e.InspectBackfills(ctx, store.BackfillFilter{RunID: runID, Limit: 1})
	if err != nil || len(ps) == 0 {
		return nil, err
	}
	bp := passOf(ps[0], e.clock.Now())
	return &bp, nil
}

func passOf(p backfill.Progress, now time.Time) BackfillPass {
	bp := BackfillPass{Progress: p, CheckpointAge: max(0, now.Sub(p.UpdatedAt))}
	if p.Total > 0 {
		pct := min(100, float64(p.Rows)*100/float64(p.Total))
		bp.Percent = &pct
	}
	return bp
}
