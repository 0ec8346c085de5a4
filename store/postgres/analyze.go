package postgres

import (
	"context"
	"time"
)

// A new schema's tables are analyzed by the store as they fill, until autovacuum first does it.
//
// A connection keeps a generic plan for a prepared statement from its first executions until an
// ANALYZE of a table the plan reads invalidates it. On a new schema those executions come while
// the tables are nearly empty, and the plans they leave scan: the record write (`UPDATE runs …
// FROM unnest(…)`) as a hash join over every run, a wake-up's delete of its runs' timers as a
// scan of every timer. Each ANALYZE makes the plans again from the table as it then is, and
// autovacuum analyzes a table each time a tenth of it has changed, but only when it visits the
// database (autovacuum_naptime, a minute by default). So every deployment on a new database,
// and every test or benchmark that makes one, runs its first minute on plans made for empty
// tables: each such statement reads every row of its table, and the cost grows as the table does
// ("Plans cached while the tables were empty", docs/architecture.md).
//
// So until autovacuum has analyzed a table once, the store does that part of its work on a
// shorter clock: every analyzeEvery it reads the tables' counters and analyzes each table that
// holds analyzeAfter rows and growFactor times as many as its statistics say. What the plans
// depend on is the table's size, so only growth counts, not updates: a table that churns at a
// steady size (a window of wake-ups updating every run) is not analyzed again and again, which
// would make every connection plan its statements anew each time. Once autovacuum has analyzed
// every watched table (or after watchFor) the watch ends. On a database whose tables autovacuum
// has analyzed before, the watch is one read of pg_stat_user_tables.

// freshTables are the tables whose statements were seen planned as scans on a new schema: runs
// (a record's write), timers and waits (a wake-up's deletes by run). history is not among them:
// no scan of it was seen (it is read by its primary key's prefix), and it grows by ten rows a
// run, so watching it would analyze it (and make every plan that writes it again) far more often
// than runs.
var freshTables = []string{"runs", "timers", "waits"}

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
	// watchFor ends the watch where autovacuum never gets to a table (a table that stays
	// smaller than autovacuum's threshold, or autovacuum turned off).
	watchFor = 10 * time.Minute
)

// sqlFreshTables lists, of the given tables of the schema, those autovacuum has not analyzed
// yet, with how many rows they hold and how many their statistics say (-1: none yet).
const sqlFreshTables = `
SELECT s.relname, s.n_live_tup, c.reltuples FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
WHERE s.schemaname = $1 AND s.relname = ANY($2::text[]) AND s.last_autoanalyze IS NULL`

// watchFresh analyzes the tables of freshTables as they need it (above), until autovacuum has
// analyzed each, watchFor has passed, the store closes, or the database refuses (the role may not
// own the tables: then autovacuum's rounds are what remains).
func (s *Store) watchFresh() {
	defer s.wg.Done()
	t := time.NewTicker(analyzeEvery)
	defer t.Stop()
	for end := time.Now().Add(watchFor); time.Now().Before(end); {
		left, err := s.analyzeFresh(s.closing)
		if err != nil {
			if s.closing.Err() == nil {
				s.log.Warn("postgres: cannot analyze the new schema's tables; autovacuum will", "schema", s.schema, "err", err)
			}
			return
		}
		if left == 0 {
			return
		}
		select {
		case <-s.closing.Done():
			return
		case <-t.C:
		}
	}
}

// analyzeFresh analyzes the tables of freshTables that autovacuum has not analyzed yet and that
// have grown enough to need it, and returns how many autovacuum has not analyzed yet.
func (s *Store) analyzeFresh(ctx context.Context) (left int, err error) {
	rows, err := s.pool.Query(ctx, sqlFreshTables, s.schema, freshTables)
	if err != nil {
		return 0, err
	}
	var due []string
	for rows.Next() {
		var name string
		var live int64
		var known float32
		if err := rows.Scan(&name, &live, &known); err != nil {
			rows.Close()
			return 0, err
		}
		left++
		if live >= analyzeAfter && float32(live) >= growFactor*known {
			due = append(due, name)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	for _, name := range due {
		// name is one of freshTables, never input.
		if _, err := s.pool.Exec(ctx, s.render("ANALYZE {S}."+name)); err != nil {
			return 0, err
		}
	}
	return left, nil
}
