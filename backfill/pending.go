package backfill

import "sort"

// States of a declared backfill in a pending report.
const (
	StatePending   = "pending"   // declared, no pass under this name
	StateFailed    = "failed"    // the newest pass failed (the queue may have dead-lettered it)
	StateRunning   = "running"   // a pass is in flight
	StateCompleted = "completed" // a completed pass exists: nothing re-runs without force
	StateExcluded  = "excluded"  // its environments leave this one out
)

// PendingRow is one declared backfill's state.
type PendingRow struct {
	Name  string `json:"name"`
	State string `json:"state"`
	// RunID is the pass the state was read from ("" for pending and excluded).
	RunID string `json:"runId,omitempty"`
	// Checksum is the declared one; LedgerChecksum the newest pass's, when it differs.
	Checksum       string `json:"checksum"`
	LedgerChecksum string `json:"ledgerChecksum,omitempty"`
}

// Report is declared minus completed, for one environment.
type Report struct {
	Environment string       `json:"environment"`
	Rows        []PendingRow `json:"rows"`
	// Pending names the backfills still to sweep here: pending and failed. Running is not
	// pending: a check red for the whole of every sweep gets muted.
	Pending []string `json:"pending"`
	// Orphaned names passes in the ledger whose backfill is no longer declared.
	Orphaned []string `json:"orphaned"`
}

// Unswept reports whether anything is pending: a deploy check exits non-zero on it.
func (r Report) Unswept() bool { return len(r.Pending) > 0 }

// Pending computes the report from the declarations and the ledger (newest first, as
// InspectBackfills returns it).
func Pending(decls []Declaration, ledger []Progress, environment string) Report {
	rep := Report{Environment: environment, Rows: []PendingRow{}, Pending: []string{}, Orphaned: []string{}}
	byName := map[string][]Progress{}
	for _, p := range ledger {
		byName[p.Name] = append(byName[p.Name], p)
	}
	declared := map[string]bool{}
	sorted := append([]Declaration(nil), decls...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for _, d := range sorted {
		if declared[d.Name] {
			continue
		}
		declared[d.Name] = true
		row := PendingRow{Name: d.Name, Checksum: d.Checksum}
		passes := byName[d.Name]
		switch {
		case d.Excludes(environment):
			row.State = StateExcluded
		case len(passes) == 0:
			row.State = StatePending
		default:
			newest := passes[0]
			row.State, row.RunID = newest.Status, newest.RunID
			for _, p := range passes {
				if p.Status == StatusCompleted {
					row.State, row.RunID = StateCompleted, p.RunID
					break
				}
			}
			if newest.Checksum != d.Checksum {
				row.LedgerChecksum = newest.Checksum
			}
		}
		if row.State == StatePending || row.State == StateFailed {
			rep.Pending = append(rep.Pending, d.Name)
		}
		rep.Rows = append(rep.Rows, row)
	}
	for name := range byName {
		if !declared[name] {
			rep.Orphaned = append(rep.Orphaned, name)
		}
	}
	sort.Strings(rep.Orphaned)
	return rep
}
