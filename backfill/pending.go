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
	// Tenants holds, for a backfill declared PerTenant, the state of each tenant that has a pass
	// in the ledger, by tenant: each from that tenant's own passes, as the gate judges a pass of
	// that tenant. State is then the worst of them (failed, then running, then completed), so a
	// tenant whose newest pass failed keeps the name pending however many other tenants
	// completed. A tenant with no pass at all is not listed: the engine cannot know the tenants
	// that never had one, and TenantState answers pending for them.
	Tenants []TenantState `json:"tenants,omitempty"`
}

// TenantState is one tenant's state of a per-tenant backfill.
type TenantState struct {
	Tenant string `json:"tenant"`
	State  string `json:"state"`
	RunID  string `json:"runId,omitempty"`
}

// Report is declared minus completed, for one environment.
type Report struct {
	Environment string       `json:"environment"`
	Rows        []PendingRow `json:"rows"`
	// Pending names the backfills still to sweep here: pending and failed. Running is not
	// pending: a check red for the whole of every sweep gets muted. A per-tenant backfill is
	// named when a tenant of it is (PendingRow.Tenants).
	Pending []string `json:"pending"`
	// Orphaned names passes in the ledger whose backfill is no longer declared.
	Orphaned []string `json:"orphaned"`
}

// Unswept reports whether anything is pending: a deploy check exits non-zero on it.
func (r Report) Unswept() bool { return len(r.Pending) > 0 }

// TenantState is the state of name for one tenant: a per-tenant backfill's state for that
// tenant (pending when it has no pass), or the backfill's own state when it is declared for
// every tenant (tenant is then ignored); "" when name is not declared. An application that knows
// its tenants checks each with it.
func (r Report) TenantState(name, tenant string) string {
	for _, row := range r.Rows {
		if row.Name != name {
			continue
		}
		if row.Tenants == nil {
			// Declared for every tenant, excluded here, or per tenant with no pass at all
			// (pending).
			return row.State
		}
		for _, ts := range row.Tenants {
			if ts.Tenant == tenant {
				return ts.State
			}
		}
		return StatePending
	}
	return ""
}

// Pending computes the report from the declarations and the ledger (newest first, as
// InspectBackfills returns it). A backfill declared AllTenants is judged on its passes of no
// tenant, one declared PerTenant on each tenant's passes (PendingRow.Tenants).
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
		perTenant := d.Tenant == "input"
		passes := byName[d.Name]
		if !perTenant {
			passes = ofTenant(passes, "")
		}
		switch {
		case d.Excludes(environment):
			row.State = StateExcluded
		case len(passes) == 0:
			row.State = StatePending
		case !perTenant:
			row.State, row.RunID = stateOf(passes)
		default:
			row.Tenants = tenantStates(passes)
			row.State, row.RunID = worst(row.Tenants)
		}
		if len(passes) > 0 && row.State != StateExcluded && passes[0].Checksum != d.Checksum {
			row.LedgerChecksum = passes[0].Checksum
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

// stateOf is the state of one scope's passes (newest first): completed when any completed,
// otherwise the newest pass's.
func stateOf(passes []Progress) (state, runID string) {
	for _, p := range passes {
		if p.Status == StatusCompleted {
			return StateCompleted, p.RunID
		}
	}
	return passes[0].Status, passes[0].RunID
}

func ofTenant(passes []Progress, tenant string) []Progress {
	var out []Progress
	for _, p := range passes {
		if p.Tenant == tenant {
			out = append(out, p)
		}
	}
	return out
}

// tenantStates is the state of each tenant that has passes, by tenant.
func tenantStates(passes []Progress) []TenantState {
	byTenant := map[string][]Progress{}
	var tenants []string
	for _, p := range passes {
		if _, ok := byTenant[p.Tenant]; !ok {
			tenants = append(tenants, p.Tenant)
		}
		byTenant[p.Tenant] = append(byTenant[p.Tenant], p)
	}
	sort.Strings(tenants)
	out := make([]TenantState, 0, len(tenants))
	for _, t := range tenants {
		state, run := stateOf(byTenant[t])
		out = append(out, TenantState{Tenant: t, State: state, RunID: run})
	}
	return out
}

// worst is the state a per-tenant backfill reports for its tenants: failed when any tenant's is,
// then running, then completed; with the run of the first tenant in that state.
func worst(ts []TenantState) (state, runID string) {
	for _, want := range []string{StateFailed, StateRunning} {
		for _, t := range ts {
			if t.State == want {
				return t.State, t.RunID
			}
		}
	}
	return StateCompleted, ts[0].RunID
}
