package postgres

import "sync"

// Dedupe ids (see dedupe.go). Written with {S} like sql.go's statements and rendered per schema
// on first use.
const (
	// sqlDedupeClaim records the id for the run about to be created. A concurrent claim of the
	// same id waits here for the first transaction and then inserts nothing.
	sqlDedupeClaim = `INSERT INTO {S}.dedupe (id, run_id, created_at) VALUES ($1, $2, $3)
ON CONFLICT (id) DO NOTHING RETURNING id`
	// sqlDedupeGet runs after the claim in the same pipeline; in a fresh snapshot it sees the
	// committed row that made the claim a no-op.
	sqlDedupeGet = `SELECT run_id FROM {S}.dedupe WHERE id = $1`
	// sqlDedupeSet points the id at the run the create returned (a live run of the same key,
	// when the create was deduped by key).
	sqlDedupeSet   = `UPDATE {S}.dedupe SET run_id = $2 WHERE id = $1`
	sqlDedupePrune = `DELETE FROM {S}.dedupe WHERE created_at < $1`
)

// rendered maps (schema, text) to the rendered text. A struct key: render runs on every claim,
// and a key built by concatenation would allocate a copy of the statement each time.
var rendered sync.Map

type renderKey struct{ schema, text string }

// render returns text rendered for this store's schema.
func (s *Store) render(text string) string {
	k := renderKey{s.schema, text}
	if v, ok := rendered.Load(k); ok {
		return v.(string)
	}
	v := schemaReplacer(s.schema).Replace(text)
	rendered.Store(k, v)
	return v
}
