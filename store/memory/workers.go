package memory

import (
	"context"
	"sort"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/store"
)

// WorkerRelease implements store.Workers.
func (s *Store) WorkerRelease(ctx context.Context, workerID string, now time.Time) ([]store.Woken, error) {
	if workerID == "" {
		return nil, jobs.Errorf(jobs.CodeBadRequest, "release of a worker needs its id")
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()

	var out []store.Woken
	for _, r := range s.runs {
		if r.run.WorkerID != workerID {
			continue
		}
		switch r.run.State {
		case store.StateRunning:
			r.run.WorkerID = ""
			r.run.LeaseUntil = time.Time{}
			r.run.ReadyAt = now
			r.run.UpdatedAt = now
			s.setState(r, store.StateReady)
			out = append(out, store.Woken{RunID: r.run.ID, Queue: r.run.Queue, Reclaimed: true})
		case store.StateReady:
			r.run.WorkerID = ""
			out = append(out, store.Woken{RunID: r.run.ID, Queue: r.run.Queue})
		case store.StateSuspended:
			r.run.WorkerID = ""
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].RunID < out[j].RunID })
	return out, nil
}
