package store

import (
	"time"

	"github.com/ultimat3/jobs"
)

// One claim for several workers. The matching service gathers the polls of different workers
// that arrive while a claim of the same queues is in flight, and makes one claim for all of them
// (matching/gather.go): every claim is a store transaction, so two worker processes polling on
// their own paid two where one would do. A run's lease, heartbeats and sticky dispatch are by
// its WorkerID, so such a claim still stamps each run with the worker it is for: its share's.
//
// The rule, the same in every store (ShareOut):
//  1. The candidates are the claimable runs in claim order, at most the shares' total, exactly
//     as a claim of that limit would take them, except that a run held for any share's worker
//     is claimable (Holder).
//  2. A held run goes to its holder's share, in claim order, while that share has room; past
//     it the run is not claimed (it stays ready, held, for that worker's next claim).
//  3. The other runs fill the room the shares have left, in claim order, the shares in the
//     order given: the first share's room first.
// A claim may so return fewer runs than its total, which a claim may always do.

// ClaimShare is one worker's part of a claim: up to Limit runs for WorkerID.
type ClaimShare struct {
	WorkerID string
	Limit    int
}

// MaxShares bounds the shares of one claim.
const MaxShares = 256

// checkShares refuses shares that could not be told apart or that leave WorkerID or Limit set.
func (p ClaimParams) checkShares() error {
	if len(p.Shares) == 0 {
		return nil
	}
	if p.WorkerID != "" || p.Limit != 0 {
		return jobs.Errorf(jobs.CodeBadRequest, "claim: WorkerID and Limit must be unset in a claim with Shares")
	}
	if len(p.Shares) > MaxShares {
		return jobs.Errorf(jobs.CodeBadRequest, "claim: %d shares, at most %d", len(p.Shares), MaxShares)
	}
	seen := make(map[string]bool, len(p.Shares))
	for _, sh := range p.Shares {
		if sh.WorkerID == "" || sh.Limit < 0 || seen[sh.WorkerID] {
			return jobs.Errorf(jobs.CodeBadRequest,
				"claim: each share needs a worker id of its own and a limit of 0 or more (share %q, limit %d)",
				sh.WorkerID, sh.Limit)
		}
		seen[sh.WorkerID] = true
	}
	return nil
}

// Claimers is the claim's shares: Shares, or the one share of WorkerID and Limit.
func (p ClaimParams) Claimers() []ClaimShare {
	if len(p.Shares) > 0 {
		return p.Shares
	}
	return []ClaimShare{{WorkerID: p.WorkerID, Limit: p.Limit}}
}

// Total is how many runs the claim takes at most: Limit, or the shares' limits added up.
func (p ClaimParams) Total() int {
	if len(p.Shares) == 0 {
		return p.Limit
	}
	n := 0
	for _, sh := range p.Shares {
		n += sh.Limit
	}
	return n
}

// Holder is the worker a ready run stamped with workerID and ready since readyAt is held for:
// that worker while the run's sticky window lasts (after StickyBefore), "" when any may take it.
func (p ClaimParams) Holder(workerID string, readyAt time.Time) string {
	if readyAt.After(p.StickyBefore) {
		return workerID
	}
	return ""
}

// Claimable reports whether this claim may take a ready run stamped with workerID and ready since
// readyAt: one held for nobody or for one of its shares' workers.
func (p ClaimParams) Claimable(workerID string, readyAt time.Time) bool {
	h := p.Holder(workerID, readyAt)
	if h == "" || (len(p.Shares) == 0 && h == p.WorkerID) {
		return true
	}
	for _, sh := range p.Shares {
		if sh.WorkerID == h {
			return true
		}
	}
	return false
}

// ShareOut splits a claim's candidates, given by their holders in claim order (step 1 above),
// among its shares: out[i] is the worker candidate i is claimed for, "" when it is left ready.
func (p ClaimParams) ShareOut(holders []string) []string {
	shares := p.Claimers()
	out := make([]string, len(holders))
	room := make(map[string]int, len(shares))
	for _, sh := range shares {
		room[sh.WorkerID] = sh.Limit
	}
	for i, h := range holders {
		if h != "" && room[h] > 0 {
			out[i] = h
			room[h]--
		}
	}
	k := 0
	for i, h := range holders {
		if h != "" {
			continue
		}
		for k < len(shares) && room[shares[k].WorkerID] == 0 {
			k++
		}
		if k == len(shares) {
			break
		}
		out[i] = shares[k].WorkerID
		room[shares[k].WorkerID]--
	}
	return out
}
