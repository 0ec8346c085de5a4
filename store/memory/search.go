package memory

import (
	"context"
	"sort"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/store"
)

// RunSearch implements store.Searcher: the reference model scans every run, which is the
// meaning the indexed backends must agree with.
func (s *Store) RunSearch(ctx context.Context, q store.RunQuery) ([]store.Run, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()

	var out []store.Run
	for _, r := range s.runs {
		x := &r.run
		if !matches(x, q) {
			continue
		}
		out = append(out, *x)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID > out[j].ID })
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[:q.Limit]
	}
	for i := range out {
		out[i] = cloneRun(out[i])
	}
	return out, nil
}

func matches(x *store.Run, q store.RunQuery) bool {
	switch {
	case q.Queue != "" && x.Queue != q.Queue,
		q.State != "" && x.State != q.State,
		q.Job != "" && x.Job != q.Job,
		q.Tenant != "" && x.Tenant != q.Tenant,
		q.Key != "" && x.Key != q.Key,
		q.Before != "" && x.ID >= q.Before,
		!q.CreatedFrom.IsZero() && x.CreatedAt.Before(q.CreatedFrom),
		!q.CreatedTo.IsZero() && !x.CreatedAt.Before(q.CreatedTo):
		return false
	}
	return true
}

// RunFinishedCounts implements store.Searcher.
func (s *Store) RunFinishedCounts(ctx context.Context, since time.Time, width time.Duration) ([]store.FinishedCount, error) {
	if width <= 0 {
		return nil, jobs.Errorf(jobs.CodeBadRequest, "bucket width must be positive, got %s", width)
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()

	type k struct {
		queue  string
		state  store.State
		bucket int
	}
	counts := map[k]int{}
	for _, r := range s.runs {
		x := &r.run
		if !x.State.Finished() || x.FinishedAt.IsZero() || x.FinishedAt.Before(since) {
			continue
		}
		counts[k{x.Queue, x.State, int(x.FinishedAt.Sub(since) / width)}]++
	}
	out := make([]store.FinishedCount, 0, len(counts))
	for key, n := range counts {
		out = append(out, store.FinishedCount{Queue: key.queue, State: key.state, Bucket: key.bucket, Count: n})
	}
	store.SortFinishedCounts(out)
	return out, nil
}
