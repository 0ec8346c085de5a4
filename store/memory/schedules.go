package memory

import (
	"context"
	"sort"
	"time"

	"github.com/ultimat3/jobs/store"
)

// LeaderAcquire implements store.Schedules.
func (s *Store) LeaderAcquire(ctx context.Context, p store.LeaderParams) (store.Leader, error) {
	if err := s.lock(ctx); err != nil {
		return store.Leader{}, err
	}
	defer s.mu.Unlock()
	l, ok := s.leaders[p.Role]
	if !ok || l.Holder == p.Holder || !l.Until.After(p.Now) {
		l = store.Leader{Role: p.Role, Holder: p.Holder, Until: p.Until}
		s.leaders[p.Role] = l
	}
	return l, nil
}

// LeaderRelease implements store.Schedules.
func (s *Store) LeaderRelease(ctx context.Context, role, holder string) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if l, ok := s.leaders[role]; ok && l.Holder == holder {
		delete(s.leaders, role)
	}
	return nil
}

// ScheduleInit implements store.Schedules.
func (s *Store) ScheduleInit(ctx context.Context, names []string, watermark time.Time) ([]store.ScheduleState, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := make([]store.ScheduleState, len(names))
	for i, n := range names {
		st, ok := s.schedules[n]
		if !ok {
			st = store.ScheduleState{Name: n, Watermark: watermark, UpdatedAt: watermark}
			s.schedules[n] = st
		}
		out[i] = st
	}
	return out, nil
}

// ScheduleList implements store.Schedules.
func (s *Store) ScheduleList(ctx context.Context) ([]store.ScheduleState, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := make([]store.ScheduleState, 0, len(s.schedules))
	for _, st := range s.schedules {
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// ScheduleFire implements store.Schedules: the check, the creates and the watermark all happen
// under the one mutex, which is this store's transaction.
func (s *Store) ScheduleFire(ctx context.Context, p store.ScheduleFireParams) ([]store.CreateRunResult, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	l, lok := s.leaders[p.Role]
	st, sok := s.schedules[p.Name]
	if err := store.CheckFire(p, l, lok, st, sok); err != nil {
		return nil, err
	}
	res, err := s.create(p.Runs)
	if err != nil {
		return nil, err
	}
	s.schedules[p.Name] = store.Fired(st, p, res)
	return res, nil
}

// SchedulePause implements store.Schedules.
func (s *Store) SchedulePause(ctx context.Context, name string, paused bool, watermark, now time.Time) (store.ScheduleState, error) {
	if err := s.lock(ctx); err != nil {
		return store.ScheduleState{}, err
	}
	defer s.mu.Unlock()
	st, ok := s.schedules[name]
	if !ok {
		return store.ScheduleState{}, store.ErrScheduleNotFound(name)
	}
	st = store.Paused(st, paused, watermark, now)
	s.schedules[name] = st
	return st, nil
}
