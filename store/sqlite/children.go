package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/store"
)

type scanner interface{ Scan(dest ...any) error }

func scanChild(row scanner) (store.ChildLink, error) {
	var l store.ChildLink
	var detached, at int64
	if err := row.Scan(&l.ChildID, &l.ParentID, &l.Name, &detached, &at); err != nil {
		return l, err
	}
	l.Detached, l.CreatedAt = detached != 0, decTime(at)
	return l, nil
}

// ChildLinkAdd implements store.Children: insert-if-absent, then read, in one write transaction.
func (s *Store) ChildLinkAdd(ctx context.Context, l store.ChildLink) (store.ChildLink, error) {
	if l.ParentID == "" || l.ChildID == "" {
		return store.ChildLink{}, jobs.Errorf(jobs.CodeInvariant, "child link: parent %q, child %q", l.ParentID, l.ChildID)
	}
	var out store.ChildLink
	err := s.write(ctx, "child link", func(t *wtx) error {
		detached := 0
		if l.Detached {
			detached = 1
		}
		if _, err := t.exec(sqlChildInsert, l.ChildID, l.ParentID, l.Name, detached, encTime(l.CreatedAt)); err != nil {
			return err
		}
		var err error
		out, err = scanChild(t.queryRow(sqlChildGet, l.ChildID))
		return err
	})
	return out, err
}

// ChildrenOf implements store.Children.
func (s *Store) ChildrenOf(ctx context.Context, parentID string) ([]store.ChildLink, error) {
	return s.childLinks(ctx, "children", sqlChildrenOf, parentID)
}

// childLinks reads the links a query selects (its columns are scanChild's).
func (s *Store) childLinks(ctx context.Context, what, query string, args ...any) ([]store.ChildLink, error) {
	rows, err := s.readQuery(ctx, query, args...)
	if err != nil {
		return nil, failed(what, err)
	}
	defer rows.Close()
	var out []store.ChildLink
	for rows.Next() {
		l, err := scanChild(rows)
		if err != nil {
			return nil, failed(what, err)
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, failed(what, err)
	}
	return out, nil
}

// ParentOf implements store.Children.
func (s *Store) ParentOf(ctx context.Context, childID string) (store.ChildLink, bool, error) {
	rows, err := s.readQuery(ctx, sqlChildGet, childID)
	if err != nil {
		return store.ChildLink{}, false, failed("parent", err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return store.ChildLink{}, false, failed("parent", err)
		}
		return store.ChildLink{}, false, nil
	}
	l, err := scanChild(rows)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return store.ChildLink{}, false, failed("parent", err)
	}
	return l, true, nil
}

// FinishedChildrenOfWaiting implements store.Children. A limit of zero or less lists them all
// (SQLite's LIMIT -1).
func (s *Store) FinishedChildrenOfWaiting(ctx context.Context, event string, limit int) ([]store.ChildLink, error) {
	if limit <= 0 {
		limit = -1
	}
	return s.childLinks(ctx, "children to tell", sqlChildrenToTell, event, limit)
}
