package store

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/ultimat3/jobs"
)

// Flow control in the claim path: priorities and fair claiming across tenants.
//
// Priority. A run's Priority is a head start in its tenant's claim order, not a separate lane: a
// run of priority p that became ready at t is ordered as if it had become ready at
// t - p×PriorityStep (its ClaimAt). This is also the starvation rule: a higher priority runs first
// among runs that became ready at about the same time, but a run is never overtaken by a run that
// became ready more than (jobs.MaxPriority-jobs.MinPriority)×PriorityStep after it, whatever their
// priorities, so a low-priority run ages to the front instead of waiting forever.
//
// Fairness. A queue's ready runs are split into lanes, one per tenant (the runs of no tenant are
// the lane ""). A claim rotates across the lanes, starting after the lane the previous claim of
// the queue ended on (ClaimParams.Rotation), so one tenant's backlog of 50,000 runs delays
// another tenant's new run by at most one round of claims, whatever the claims' sizes:
//
//  1. The queue's lanes are put in rotation order: the tenants after Rotation[queue] in
//     ascending order, then the others (those at or before it) in ascending order; with no
//     entry, all in ascending order. The first Limit lanes are kept (n of them).
//  2. From each kept lane, up to ceil(Limit/n) claimable runs are taken in (ClaimAt, ID) order,
//     each ranked by its place in its lane (1, 2, …).
//  3. If that took fewer than Limit runs in all (a lane had fewer claimable runs than its share),
//     each lane that gave its whole share gives up to the shortfall more, ranked on from its
//     share: a claim leaves no slot empty while a kept lane has a claimable run. Without it, a
//     tenant whose runs arrive one at a time halved every claim made while they arrived.
//  4. Across the polled queues, the candidates are ordered by (rank, the lane's place in the
//     rotation, ClaimAt, ID) and the first Limit are claimed.
//
// So priority orders a tenant's own runs, and breaks ties between queues; across tenants, the
// rotation decides. A claim reads at most 2×Limit lane heads and Limit² runs, never the backlog.

// PriorityStep is the head start one level of priority buys (jobs.PriorityStep; the SQL backends'
// indexes spell it out, one minute).
const PriorityStep = jobs.PriorityStep

// ClaimAt is where a run ready at readyAt with the given priority sorts in its lane.
func ClaimAt(readyAt time.Time, priority int) time.Time {
	return readyAt.Add(-time.Duration(priority) * PriorityStep)
}

// LaneShare is how many runs a claim of limit runs takes at most from each of lanes lanes.
func LaneShare(limit, lanes int) int {
	if lanes <= 0 {
		return 0
	}
	return (limit + lanes - 1) / lanes
}

// LanePlace is a lane's place in the rotation of a queue whose last claim ended on cursor (has is
// false when there is none): lanes sort by (wrapped, tenant).
func LanePlace(tenant, cursor string, has bool) (wrapped bool) {
	return has && tenant <= cursor
}

// RotationOrder sorts tenants into rotation order.
func RotationOrder(tenants []string, cursor string, has bool) {
	slices.SortFunc(tenants, func(a, b string) int {
		wa, wb := LanePlace(a, cursor, has), LanePlace(b, cursor, has)
		if wa != wb {
			if wa {
				return 1
			}
			return -1
		}
		return strings.Compare(a, b)
	})
}

// ClaimOrder sorts the runs a claim took into its order (step 4 above); with p.OldestFirst, by
// (ReadyAt, ID). Every backend returns its claims in this order. Ranks are counted within the
// runs given, which is right for a claim's runs: it takes each lane's first runs.
func ClaimOrder(runs []Run, p ClaimParams) {
	if p.OldestFirst {
		slices.SortFunc(runs, func(a, b Run) int {
			if c := a.ReadyAt.Compare(b.ReadyAt); c != 0 {
				return c
			}
			return strings.Compare(a.ID, b.ID)
		})
		return
	}
	byClaim := func(a, b Run) int {
		if c := ClaimAt(a.ReadyAt, a.Priority).Compare(ClaimAt(b.ReadyAt, b.Priority)); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	}
	slices.SortFunc(runs, byClaim)
	type lane struct{ queue, tenant string }
	count := map[lane]int{}
	rank := make(map[string]int, len(runs))
	for _, r := range runs {
		l := lane{r.Queue, r.Tenant}
		count[l]++
		rank[r.ID] = count[l]
	}
	slices.SortStableFunc(runs, func(a, b Run) int {
		if c := cmp.Compare(rank[a.ID], rank[b.ID]); c != 0 {
			return c
		}
		ca, hasA := p.Rotation[a.Queue]
		cb, hasB := p.Rotation[b.Queue]
		wa, wb := LanePlace(a.Tenant, ca, hasA), LanePlace(b.Tenant, cb, hasB)
		if wa != wb {
			if wa {
				return 1
			}
			return -1
		}
		return strings.Compare(a.Tenant, b.Tenant)
	})
}

// NextRotation returns rot with each queue's cursor moved to the lane its claim ended on (the
// last of the claimed runs of that queue, in claim order).
func NextRotation(rot map[string]string, claimed []Run) map[string]string {
	if len(claimed) == 0 {
		return rot
	}
	next := make(map[string]string, len(rot)+1)
	for q, t := range rot {
		next[q] = t
	}
	for _, r := range claimed {
		next[r.Queue] = r.Tenant
	}
	return next
}
