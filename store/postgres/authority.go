package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// qa renders one of sql_authority.go's statements for this store's schema.
func (s *Store) qa(text string) string { return schemaReplacer(s.schema).Replace(text) }

// KeyEnsure implements store.Keys in one statement: the insert's row when it won, else the row a
// concurrent (or earlier) insert committed. A race lost inside the statement's snapshot is
// retried once: the winner's row is visible to the next statement.
func (s *Store) KeyEnsure(ctx context.Context, name string, candidate []byte) ([]byte, error) {
	var out []byte
	for try := 0; try < 2; try++ {
		err := s.pool.QueryRow(ctx, s.qa(sqlKeyEnsure), name, candidate).Scan(&out)
		if err == nil {
			return out, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, unavailable("ensure key", err)
		}
	}
	return nil, unavailable("ensure key", errors.New("no key row after insert"))
}
