package postgres

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
)

// planText runs an EXPLAIN (or EXPLAIN … EXECUTE) on q and returns its lines joined, for the
// tests that hold a statement to the plan it must keep.
func planText(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, query string, args ...any) (string, error) {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return "", err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return strings.Join(lines, "\n"), err
}
