package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"

	"github.com/ultimat3/jobs/store"
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

// ManifestPut implements store.Manifests: the worker's links are replaced whole, so a
// declaration its manifest dropped loses the worker even when two manifests share a timestamp.
func (s *Store) ManifestPut(ctx context.Context, p store.ManifestParams) error {
	queues, err := json.Marshal(nonNil(p.Queues))
	if err != nil {
		return failed("manifest", err)
	}
	now := encTime(p.Now)
	return s.write(ctx, "manifest", func(t *wtx) error {
		if _, err := t.exec(sqlManifestWorkerUpsert, p.WorkerID, string(queues), now); err != nil {
			return err
		}
		if _, err := t.exec(sqlDeclWorkersClear, p.WorkerID); err != nil {
			return err
		}
		for _, d := range p.Declared {
			data := d.Data
			if data == nil {
				data = []byte{}
			}
			if _, err := t.exec(sqlDeclUpsert, d.Kind, d.Name, d.Checksum, data, now, now); err != nil {
				return err
			}
			if _, err := t.exec(sqlDeclWorkerInsert, d.Kind, d.Name, d.Checksum, p.WorkerID, now); err != nil {
				return err
			}
		}
		return nil
	})
}

// ManifestRead implements store.Manifests, in one read transaction so the three reads agree.
func (s *Store) ManifestRead(ctx context.Context, kind string) ([]store.DeclarationRecord, []store.WorkerRecord, error) {
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, nil, failed("read manifest", err)
	}
	defer tx.Rollback()
	var decls []store.DeclarationRecord
	index := map[[3]string]int{}
	rows, err := tx.QueryContext(ctx, sqlDeclsRead, kind, kind)
	if err != nil {
		return nil, nil, failed("read manifest", err)
	}
	for rows.Next() {
		var d store.DeclarationRecord
		var first, last int64
		if err := rows.Scan(&d.Kind, &d.Name, &d.Checksum, &d.Data, &first, &last); err != nil {
			rows.Close()
			return nil, nil, failed("read manifest", err)
		}
		d.FirstSeen, d.LastSeen = decTime(first), decTime(last)
		index[[3]string{d.Kind, d.Name, d.Checksum}] = len(decls)
		decls = append(decls, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, failed("read manifest", err)
	}
	rows, err = tx.QueryContext(ctx, sqlDeclWorkersRead, kind, kind)
	if err != nil {
		return nil, nil, failed("read manifest", err)
	}
	for rows.Next() {
		var k [3]string
		var w store.DeclaredBy
		var at int64
		if err := rows.Scan(&k[0], &k[1], &k[2], &w.WorkerID, &at); err != nil {
			rows.Close()
			return nil, nil, failed("read manifest", err)
		}
		w.LastSeen = decTime(at)
		if i, ok := index[k]; ok {
			decls[i].Workers = append(decls[i].Workers, w)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, failed("read manifest", err)
	}
	var workers []store.WorkerRecord
	rows, err = tx.QueryContext(ctx, sqlManifestWorkersRead)
	if err != nil {
		return nil, nil, failed("read manifest", err)
	}
	defer rows.Close()
	for rows.Next() {
		var w store.WorkerRecord
		var queues string
		var at int64
		if err := rows.Scan(&w.ID, &queues, &at); err != nil {
			return nil, nil, failed("read manifest", err)
		}
		if err := json.Unmarshal([]byte(queues), &w.Queues); err != nil {
			return nil, nil, failed("read manifest", err)
		}
		w.LastSeen = decTime(at)
		workers = append(workers, w)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, failed("read manifest", err)
	}
	return decls, workers, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
