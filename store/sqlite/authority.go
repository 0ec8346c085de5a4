package sqlite

import (
	"context"
)

// KeyEnsure implements store.Keys: insert-if-absent, then read, in one write transaction.
func (s *Store) KeyEnsure(ctx context.Context, name string, candidate []byte) ([]byte, error) {
	var out []byte
	err := s.write(ctx, "ensure key", func(t *wtx) error {
		if _, err := t.exec(sqlKeyInsert, name, candidate); err != nil {
			return err
		}
		return t.queryRow(sqlKeyGet, name).Scan(&out)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
