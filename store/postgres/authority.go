package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/ultimat3/jobs/store"
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

// ManifestPut implements store.Manifests in one transaction, sent as one pipeline.
func (s *Store) ManifestPut(ctx context.Context, p store.ManifestParams) error {
	n := len(p.Declared)
	kinds, names, sums, data := make([]string, n), make([]string, n), make([]string, n), make([][]byte, n)
	for i, d := range p.Declared {
		kinds[i], names[i], sums[i], data[i] = d.Kind, d.Name, d.Checksum, d.Data
		if data[i] == nil {
			data[i] = []byte{}
		}
	}
	queues := p.Queues
	if queues == nil {
		queues = []string{}
	}
	now := pgTime(p.Now)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		b.Queue(s.qa(sqlManifestWorkerUpsert), p.WorkerID, queues, now)
		b.Queue(s.qa(sqlDeclWorkersClear), p.WorkerID)
		if n > 0 {
			b.Queue(s.qa(sqlDeclsUpsert), kinds, names, sums, data, now)
			b.Queue(s.qa(sqlDeclWorkersInsert), kinds, names, sums, p.WorkerID, now)
		}
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return unavailable("manifest", err)
	}
	return nil
}

// ManifestRead implements store.Manifests in one read-only snapshot, so the three reads agree.
func (s *Store) ManifestRead(ctx context.Context, kind string) ([]store.DeclarationRecord, []store.WorkerRecord, error) {
	var decls []store.DeclarationRecord
	var workers []store.WorkerRecord
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		decls, workers = nil, nil
		index := map[[3]string]int{}
		rows, err := tx.Query(ctx, s.qa(sqlDeclsRead), kind)
		if err != nil {
			return err
		}
		for rows.Next() {
			var d store.DeclarationRecord
			if err := rows.Scan(&d.Kind, &d.Name, &d.Checksum, &d.Data, &d.FirstSeen, &d.LastSeen); err != nil {
				rows.Close()
				return err
			}
			d.FirstSeen, d.LastSeen = d.FirstSeen.UTC(), d.LastSeen.UTC()
			index[[3]string{d.Kind, d.Name, d.Checksum}] = len(decls)
			decls = append(decls, d)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, s.qa(sqlDeclWorkersRead), kind)
		if err != nil {
			return err
		}
		for rows.Next() {
			var k [3]string
			var w store.DeclaredBy
			if err := rows.Scan(&k[0], &k[1], &k[2], &w.WorkerID, &w.LastSeen); err != nil {
				rows.Close()
				return err
			}
			w.LastSeen = w.LastSeen.UTC()
			if i, ok := index[k]; ok {
				decls[i].Workers = append(decls[i].Workers, w)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, s.qa(sqlManifestWorkersRead))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var w store.WorkerRecord
			if err := rows.Scan(&w.ID, &w.Queues, &w.LastSeen); err != nil {
				return err
			}
			w.LastSeen = w.LastSeen.UTC()
			workers = append(workers, w)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, nil, unavailable("read manifest", err)
	}
	return decls, workers, nil
}
