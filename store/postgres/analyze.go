package postgres

import (
	"context"
	"time"
)

// The store analyzes its hot tables when they outgrow their statistics fourfold, without waiting
// for autovacuum.
//
// A connection keeps a generic plan for a prepared statement from its first executions until an
// ANALYZE of a table the plan reads invalidates it. Made while a table is nearly empty, or while
// its statistics say it is (it was analyzed empty: a new schema, a queue that drained), those
// plans scan: the record write (`UPDATE runs … FROM unnest(…)`) as a hash join over every run, a
// create's probe of its key's live run as a scan of runs, a wake-up's delete of its runs' timers
// as a scan of every timer. Autovacuum analyzes a table once a tenth of it has changed, but only
// when it visits the database (autovacuum_naptime, a minute by default), and a burst of creates
// or wake-ups meanwhile reads every row of the table for each batch, at a cost that grows as the
// table does ("Plans cached while the tables were empty", docs/architecture.md).
//
// So every analyzeEvery the store reads the tables' counters and analyzes each table that holds
// analyzeAfter rows and growFactor times as many as its statistics say. What the plans depend on
// is the table's size, so only growth counts, not updates: a table that churns at a steady size
// (a window of wake-ups updating every run) is not analyzed again and again, which would make
// every connection plan its statements anew each time. In a steady state autovacuum's 10% rule
// keeps the statistics far inside fourfold, and the watch is one read of pg_stat_user_tables a
// second. It stops at the first refusal (a role that does not own the tables: autovacuum's rounds
// are what remains then).

// watchedTables are the tables whose statements were seen planned as scans: runs (a record's write,
// a create's probe), timers and waits (a wake-up's deletes by run). history is not among them:
// no scan of it was seen (it is read by its primary key's prefix), and it grows by ten rows a
// run, so watching it would analyze it (and make every plan that writes it again) far more often
// than runs.
var watchedTables = []string{"runs", "timers", "waits"}

const (
	// analyzeAfter is the fewest rows a table holds before the store analyzes it. Below a few
	// thousand rows a scan costs about what a batch's probes do (a record write of 16 runs
	// scanning 2,000 of them takes a fraction of a millisecond), and an ANALYZE is not free:
	// besides its own read, it makes every connection plan its statements over the table again.
	analyzeAfter = 2500
	// growFactor is how much a table must have grown since its statistics were taken. Each
	// ANALYZE makes every connection plan the statements over the table again, so a table
	// filling at a steady rate is analyzed a few times (at 2,500 rows, 10,000, 40,000, …), not
	// every few seconds.
	growFactor = 4
	// analyzeEvery is how often the watch reads the tables' counters. Backends report their
	// counters about once a second, so reading more often would not see changes sooner.
	analyzeEvery = time.Second
)

// sqlWatchedTables lists the given tables of the schema with how many rows they hold and how many
// their statistics say (-1: none yet).
const sqlWatchedTables = `
SELECT s.relname, s.n_live_tup, c.reltuples FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
WHERE s.schemaname = $1 AND s.relname = ANY($2::text[])`

// watchStats analyzes the tables of watchedTables as they outgrow their statistics (above), until
// the store closes or the database refuses.
func (s *Store) watchStats() {
	defer s.wg.Done()
	t := time.NewTicker(analyzeEvery)
	defer t.Stop()
	for {
		if err := s.analyzeOutgrown(s.closing); err != nil {
			if s.closing.Err() == nil {
				s.log.Warn("postgres: cannot analyze the engine's tables; autovacuum will", "schema", s.schema, "err", err)
			}
			return
		}
		select {
		case <-s.closing.Done():
			return
		case <-t.C:
		}
	}
}

// analyzeOutgrown analyzes the tables of watchedTables that have outgrown their statistics.
func (s *Store) analyzeOutgrown(ctx context.Context) error {
	rows, err := s.pool.Query(ctx, sqlWatchedTables, s.schema, watchedTables)
	if err != nil {
		return err
	}
	var due []string
	for rows.Next() {
		var name string
		var live int64
		var known float32
		if err := rows.Scan(&name, &live, &known); err != nil {
			rows.Close()
			return err
		}
		if live >= analyzeAfter && float32(live) >= growFactor*known {
			due = append(due, name)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, name := range due {
		// name is one of watchedTables, never input.
		if _, err := s.pool.Exec(ctx, s.render("ANALYZE {S}."+name)); err != nil {
			return err
		}
	}
	return nil
}
