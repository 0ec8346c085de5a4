package memory

import (
	"context"
	"sort"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/store"
)

// ChildLinkAdd implements store.Children.
func (s *Store) ChildLinkAdd(ctx context.Context, l store.ChildLink) (store.ChildLink, error) {
	if l.ParentID == "" || l.ChildID == "" {
		return store.ChildLink{}, jobs.Errorf(jobs.CodeInvariant, "child link: parent %q, child %q", l.ParentID, l.ChildID)
	}
	if err := s.lock(ctx); err != nil {
		return store.ChildLink{}, err
	}
	defer s.mu.Unlock()
	if have, ok := s.children[l.ChildID]; ok {
		return have, nil
	}
	if s.children == nil {
		s.children = map[string]store.ChildLink{}
	}
	l.CreatedAt = l.CreatedAt.UTC()
	s.children[l.ChildID] = l
	return l, nil
}

// ChildrenOf implements store.Children.
func (s *Store) ChildrenOf(ctx context.Context, parentID string) ([]store.ChildLink, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []store.ChildLink
	for _, l := range s.children {
		if l.ParentID == parentID {
			out = append(out, l)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ChildID < out[j].ChildID
	})
	return out, nil
}

// ParentOf implements store.Children.
func (s *Store) ParentOf(ctx context.Context, childID string) (store.ChildLink, bool, error) {
	if err := s.lock(ctx); err != nil {
		return store.ChildLink{}, false, err
	}
	defer s.mu.Unlock()
	l, ok := s.children[childID]
	return l, ok, nil
}

// FinishedChildrenOfWaiting implements store.Children.
func (s *Store) FinishedChildrenOfWaiting(ctx context.Context, event string, limit int) ([]store.ChildLink, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []store.ChildLink
	for _, l := range s.children {
		child, parent := s.runs[l.ChildID], s.runs[l.ParentID]
		if child == nil || parent == nil || !child.run.State.Finished() {
			continue
		}
		for _, w := range parent.waits {
			if w.event == event {
				out = append(out, l)
				break
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].ParentID != out[j].ParentID {
			return out[i].ParentID < out[j].ParentID
		}
		return out[i].ChildID < out[j].ChildID
	})
	if limit > 0 && len(out) > limit { // limit <= 0: all of them
		out = out[:limit]
	}
	return out, nil
}
