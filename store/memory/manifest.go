package memory

import (
	"bytes"
	"context"
	"slices"
	"sort"
	"time"

	"github.com/ultimat3/jobs/store"
)

type declKey struct{ kind, name, checksum string }

type declRec struct {
	d         store.Declared
	firstSeen time.Time
	lastSeen  time.Time
	workers   map[string]time.Time
}

// manifests is the memory store's share of authority (see authority.go).
type manifests struct {
	decls   map[declKey]*declRec
	workers map[string]store.WorkerRecord
}

// ManifestPut implements store.Manifests.
func (s *Store) ManifestPut(ctx context.Context, p store.ManifestParams) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	m := &s.authority.manifests
	if m.decls == nil {
		m.decls, m.workers = map[declKey]*declRec{}, map[string]store.WorkerRecord{}
	}
	m.workers[p.WorkerID] = store.WorkerRecord{ID: p.WorkerID, Queues: slices.Clone(p.Queues), LastSeen: p.Now}
	keep := map[declKey]bool{}
	for _, d := range p.Declared {
		k := declKey{d.Kind, d.Name, d.Checksum}
		keep[k] = true
		r := m.decls[k]
		if r == nil {
			r = &declRec{d: store.Declared{Kind: d.Kind, Name: d.Name, Checksum: d.Checksum, Data: bytes.Clone(d.Data)},
				firstSeen: p.Now, workers: map[string]time.Time{}}
			m.decls[k] = r
		}
		r.lastSeen = p.Now
		r.workers[p.WorkerID] = p.Now
	}
	for k, r := range m.decls {
		if !keep[k] {
			delete(r.workers, p.WorkerID)
		}
	}
	return nil
}

// ManifestRead implements store.Manifests.
func (s *Store) ManifestRead(ctx context.Context, kind string) ([]store.DeclarationRecord, []store.WorkerRecord, error) {
	if err := s.lock(ctx); err != nil {
		return nil, nil, err
	}
	defer s.mu.Unlock()
	m := &s.authority.manifests
	var decls []store.DeclarationRecord
	for _, r := range m.decls {
		if kind != "" && r.d.Kind != kind {
			continue
		}
		rec := store.DeclarationRecord{Declared: r.d, FirstSeen: r.firstSeen, LastSeen: r.lastSeen}
		rec.Data = bytes.Clone(r.d.Data)
		for w, at := range r.workers {
			rec.Workers = append(rec.Workers, store.DeclaredBy{WorkerID: w, LastSeen: at})
		}
		sort.Slice(rec.Workers, func(i, j int) bool { return rec.Workers[i].WorkerID < rec.Workers[j].WorkerID })
		decls = append(decls, rec)
	}
	sort.Slice(decls, func(i, j int) bool {
		a, b := decls[i], decls[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Checksum < b.Checksum
	})
	var workers []store.WorkerRecord
	for _, w := range m.workers {
		w.Queues = slices.Clone(w.Queues)
		workers = append(workers, w)
	}
	sort.Slice(workers, func(i, j int) bool { return workers[i].ID < workers[j].ID })
	return decls, workers, nil
}
