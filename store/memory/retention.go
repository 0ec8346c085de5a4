package memory

import (
	"context"
	"sort"

	"github.com/ultimat3/jobs/store"
)

// protected returns the runs a dedupe id inside its window names, and the children of parents
// that have not finished. The reference model scans the ids and the links; the SQL backends probe
// an index on dedupe.run_id and the children's key per candidate.
func (s *Store) protected(p store.RetentionParams) map[string]bool {
	out := map[string]bool{}
	for _, d := range s.dedupe {
		if !d.at.Before(p.DedupeFrom) {
			out[d.runID] = true
		}
	}
	for child, l := range s.children {
		if parent, ok := s.runs[l.ParentID]; ok && parentMayWait(parent.run.State) {
			out[child] = true
		}
	}
	return out
}

// parentMayWait reports whether a parent in state st may still wait for its children: a live or
// blocked one, and a failed one, which an operator may retry (dead letters are kept for that), and
// whose retried replay then waits for a child it started before it failed. Only a completed or
// cancelled parent has ended for good.
func parentMayWait(st store.State) bool {
	return st != store.StateCompleted && st != store.StateCancelled
}

// RetentionCandidates implements store.Retention. It scans every run: the reference model is
// written to be obviously right, and a sweep is rare next to claims and commits.
func (s *Store) RetentionCandidates(ctx context.Context, p store.RetentionParams) ([]store.Run, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	keep := s.protected(p)
	var out []store.Run
	for _, r := range s.runs {
		if p.Eligible(r.run) && !keep[r.run.ID] {
			out = append(out, r.run)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].FinishedAt.Equal(out[j].FinishedAt) {
			return out[i].FinishedAt.Before(out[j].FinishedAt)
		}
		return out[i].ID < out[j].ID
	})
	if n := store.RetentionLimit(p.Limit); len(out) > n {
		out = out[:n]
	}
	for i := range out {
		out[i] = cloneRun(out[i])
	}
	return out, nil
}

// RetentionDelete implements store.Retention.
func (s *Store) RetentionDelete(ctx context.Context, p store.RetentionParams, ids []string) (store.RetentionDeleted, error) {
	if err := s.lock(ctx); err != nil {
		return store.RetentionDeleted{}, err
	}
	defer s.mu.Unlock()
	keep := s.protected(p)
	var out store.RetentionDeleted
	gone := map[string]bool{}
	for _, id := range ids[:min(len(ids), store.RetentionLimit(p.Limit))] {
		r := s.runs[id]
		if r == nil || gone[id] || keep[id] || !p.Eligible(r.run) {
			continue
		}
		s.clearTimersAndWaits(r)
		s.unindex(r)
		delete(s.runs, id)
		// The run's link to its parent is its own and goes with it (a link whose parent was
		// deleted stays while its child lives): left behind, links grew without bound.
		delete(s.children, id)
		gone[id] = true
		out.Runs = append(out.Runs, id)
		out.Events += int64(len(r.events))
	}
	if len(gone) > 0 {
		for did, d := range s.dedupe {
			if gone[d.runID] {
				delete(s.dedupe, did)
			}
		}
	}
	return out, nil
}
