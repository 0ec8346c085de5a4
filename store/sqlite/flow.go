package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"math"

	"github.com/ultimat3/jobs/store"
)

// claimFair claims in the fair order (store/flow.go): for each polled queue, it walks the lanes
// in rotation order (one index seek each, at most Limit of them, plus one to wrap around),
// reads each lane's first claimable runs (one short index range each), orders them and claims
// the first Limit. Its cost grows with Limit, not with the backlog nor the number of tenants.
func (s *Store) claimFair(ctx context.Context, p store.ClaimParams, limit int, workers string) ([]store.Run, error) {
	var out []store.Run
	err := s.write(ctx, "claim", func(t *wtx) error {
		var cands []store.Run
		holder := map[string]string{}
		seen := map[string]bool{}
		// A lane's take stops at (atClaim, atID), where a top-up (rule 3) goes on.
		type lane struct {
			queue, tenant string
			atClaim       int64
			atID          string
			full          bool
		}
		var lanes []*lane
		take := func(l *lane, n int) (int, error) {
			rows, err := t.query(sqlLaneHead, nameArgs("queue", l.queue, "tenant", l.tenant, "workers", workers,
				"sticky_before", encTime(p.StickyBefore), "after_at", l.atClaim, "after_id", l.atID, "limit", n)...)
			if err != nil {
				return 0, err
			}
			more, err := collect(rows, func(rows *sql.Rows) (store.Run, error) {
				var claimAt, readyAt int64
				var worker string
				r := store.Run{Queue: l.queue, Tenant: l.tenant}
				err := rows.Scan(&r.ID, &claimAt, &readyAt, &worker)
				holder[r.ID] = p.Holder(worker, decTime(readyAt))
				// ClaimOrder needs only the claim time: carry it as ReadyAt, priority 0.
				r.ReadyAt = decTime(claimAt)
				l.atClaim, l.atID = claimAt, r.ID
				return r, err
			})
			cands = append(cands, more...)
			return len(more), err
		}
		for _, q := range p.Queues {
			if seen[q] {
				continue
			}
			seen[q] = true
			cursor, has := p.Rotation[q]
			tenants, err := t.lanes(q, cursor, has, limit)
			if err != nil {
				return err
			}
			share := store.LaneShare(limit, len(tenants))
			for _, tenant := range tenants {
				l := &lane{queue: q, tenant: tenant, atClaim: math.MinInt64}
				lanes = append(lanes, l)
				n, err := take(l, share)
				if err != nil {
					return err
				}
				l.full = n == share
			}
		}
		if short := limit - len(cands); short > 0 {
			for _, l := range lanes {
				if !l.full {
					continue
				}
				if _, err := take(l, short); err != nil {
					return err
				}
			}
		}
		store.ClaimOrder(cands, p)
		if len(cands) > limit {
			cands = cands[:limit]
		}
		ids, holders := make([]string, len(cands)), make([]string, len(cands))
		for i, c := range cands {
			ids[i], holders[i] = c.ID, holder[c.ID]
		}
		var err error
		out, err = t.claimRuns(p, ids, holders)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// lanes returns up to limit tenants with ready runs in queue q, in rotation order.
func (t *wtx) lanes(q, cursor string, has bool, limit int) ([]string, error) {
	var out []string
	next := func(first bool, after string) (string, bool, error) {
		var tenant string
		var err error
		if first {
			err = t.queryRow(sqlLaneFirst, nameArgs("queue", q)...).Scan(&tenant)
		} else {
			err = t.queryRow(sqlLaneNext, nameArgs("queue", q, "after", after)...).Scan(&tenant)
		}
		if errors.Is(err, sql.ErrNoRows) {
			return "", false, nil
		}
		return tenant, err == nil, err
	}
	// The lanes after the cursor, then, wrapping around, the lanes up to it.
	first, after := !has, cursor
	for len(out) < limit {
		tenant, ok, err := next(first, after)
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		out = append(out, tenant)
		first, after = false, tenant
	}
	if has {
		first = true
		for len(out) < limit {
			tenant, ok, err := next(first, after)
			if err != nil {
				return nil, err
			}
			if !ok || tenant > cursor {
				break
			}
			out = append(out, tenant)
			first, after = false, tenant
		}
	}
	return out, nil
}
