package memory

import (
	"bytes"
	"context"
)

// authority is the memory store's share of what makes the engine the authority: its secrets and
// (manifest.go) what the fleet declared. Its maps are made on first use, so New stays as it was.
type authority struct {
	keys      map[string][]byte
	manifests manifests
}

// KeyEnsure implements store.Keys.
func (s *Store) KeyEnsure(ctx context.Context, name string, candidate []byte) ([]byte, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if s.authority.keys == nil {
		s.authority.keys = map[string][]byte{}
	}
	if k, ok := s.authority.keys[name]; ok {
		return bytes.Clone(k), nil
	}
	s.authority.keys[name] = bytes.Clone(candidate)
	return bytes.Clone(candidate), nil
}
