package memory

import (
	"context"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/store"
)

type dedupeRec struct {
	runID string
	at    time.Time
}

// RunCreateOnce implements store.Deduper.
func (s *Store) RunCreateOnce(ctx context.Context, p store.OnceParams) (store.CreateRunResult, error) {
	if p.ID == "" {
		return store.CreateRunResult{}, jobs.Errorf(jobs.CodeInvariant, "create once: no dedupe id")
	}
	if err := s.lock(ctx); err != nil {
		return store.CreateRunResult{}, err
	}
	defer s.mu.Unlock()
	if d, ok := s.dedupe[p.ID]; ok {
		if r := s.runs[d.runID]; r != nil {
			return store.CreateRunResult{Run: cloneRun(r.run), Deduped: true}, nil
		}
	}
	res, err := s.create([]store.CreateRunParams{p.Create})
	if err != nil {
		return store.CreateRunResult{}, err
	}
	if s.dedupe == nil {
		s.dedupe = map[string]dedupeRec{}
	}
	s.dedupe[p.ID] = dedupeRec{runID: res[0].Run.ID, at: p.Create.Run.CreatedAt}
	return res[0], nil
}

// DedupePrune implements store.Deduper.
func (s *Store) DedupePrune(ctx context.Context, before time.Time) (int, error) {
	if err := s.lock(ctx); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	n := 0
	for id, d := range s.dedupe {
		if d.at.Before(before) {
			delete(s.dedupe, id)
			n++
		}
	}
	return n, nil
}
