package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/store"
)

func scanChild(row pgx.Row) (store.ChildLink, error) {
	var l store.ChildLink
	err := row.Scan(&l.ChildID, &l.ParentID, &l.Name, &l.Detached, &l.CreatedAt)
	l.CreatedAt = l.CreatedAt.UTC()
	return l, err
}

// ChildLinkAdd implements store.Children: the insert is a no-op when the child has a link, and
// the read after it (its own statement, a fresh snapshot) sees whichever link won.
func (s *Store) ChildLinkAdd(ctx context.Context, l store.ChildLink) (store.ChildLink, error) {
	if l.ParentID == "" || l.ChildID == "" {
		return store.ChildLink{}, jobs.Errorf(jobs.CodeInvariant, "child link: parent %q, child %q", l.ParentID, l.ChildID)
	}
	if _, err := s.pool.Exec(ctx, s.render(sqlChildInsert), l.ChildID, l.ParentID, l.Name, l.Detached, l.CreatedAt); err != nil {
		return store.ChildLink{}, unavailable("child link", err)
	}
	out, err := scanChild(s.pool.QueryRow(ctx, s.render(sqlChildGet), l.ChildID))
	if err != nil {
		return store.ChildLink{}, unavailable("child link", err)
	}
	return out, nil
}

// ChildrenOf implements store.Children.
func (s *Store) ChildrenOf(ctx context.Context, parentID string) ([]store.ChildLink, error) {
	return s.childLinks(ctx, "children", sqlChildrenOf, parentID)
}

// childLinks reads the links a query selects (its columns are scanChild's).
func (s *Store) childLinks(ctx context.Context, what, query string, args ...any) ([]store.ChildLink, error) {
	rows, err := s.pool.Query(ctx, s.render(query), args...)
	if err != nil {
		return nil, unavailable(what, err)
	}
	defer rows.Close()
	var out []store.ChildLink
	for rows.Next() {
		l, err := scanChild(rows)
		if err != nil {
			return nil, unavailable(what, err)
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable(what, err)
	}
	return out, nil
}

// ParentOf implements store.Children.
func (s *Store) ParentOf(ctx context.Context, childID string) (store.ChildLink, bool, error) {
	l, err := scanChild(s.pool.QueryRow(ctx, s.render(sqlChildGet), childID))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ChildLink{}, false, nil
	}
	if err != nil {
		return store.ChildLink{}, false, unavailable("parent", err)
	}
	return l, true, nil
}

// FinishedChildrenOfWaiting implements store.Children. A limit of zero or less lists them all:
// LIMIT NULL is no limit in Postgres (a negative LIMIT is an error).
func (s *Store) FinishedChildrenOfWaiting(ctx context.Context, event string, limit int) ([]store.ChildLink, error) {
	var n *int64
	if limit > 0 {
		v := int64(limit)
		n = &v
	}
	return s.childLinks(ctx, "children to tell", sqlChildrenToTell, event, n)
}
