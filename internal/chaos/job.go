// Package chaos is the durability harness: an engine and several worker processes over SQLite or
// Postgres, a job whose every step writes a non-idempotent side-effect row, and a loop that
// SIGKILLs workers and the engine (and restarts Postgres once) at random moments. At the end it
// checks the invariants a crash must not break and prints them as a table (Report).
//
// The short version runs in `go test` (TestChaosShort); `make chaos` runs the long one
// (cmd/chaos), which writes CHAOS.md.
package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strconv"
	"time"

	_ "modernc.org/sqlite" // the side-effect file

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/uuid7"
)

// JobName is the chaos job's name.
const JobName = "chaos"

// Input is a chaos run's input: how many steps, and how long each lingers after its side effect
// (so that kills land while steps are in flight).
type Input struct {
	N       int `json:"n"`
	Steps   int `json:"steps"`
	Linger  int `json:"lingerMs"`
	Refresh int `json:"refresh,omitempty"`
}

// Effects is the side-effect store: a SQLite file outside the engine's store, written by every
// worker process. Each step's function inserts one row, with a fresh token, and returns the
// token: the history's recorded token names the execution that counted, and every other row of
// the same (run, step) is a duplicate execution.
type Effects struct{ db *sql.DB }

// OpenEffects opens (creating) the side-effect file.
func OpenEffects(path string) (*Effects, error) {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(20000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS effects (run TEXT NOT NULL, step TEXT NOT NULL, token TEXT NOT NULL, at INTEGER NOT NULL)`); err != nil {
		db.Close()
		return nil, err
	}
	return &Effects{db: db}, nil
}

// Close closes the file.
func (e *Effects) Close() error { return e.db.Close() }

// write inserts one side effect, deliberately not idempotent.
func (e *Effects) write(ctx context.Context, run, step string) (string, error) {
	token := uuid7.New(time.Now())
	_, err := e.db.ExecContext(ctx, `INSERT INTO effects (run, step, token, at) VALUES (?, ?, ?, ?)`, run, step, token, time.Now().UnixNano())
	return token, err
}

// Counts returns how many times each (run, step) side effect happened, and every token written.
func (e *Effects) Counts(ctx context.Context) (map[[2]string]int, map[string]bool, error) {
	rows, err := e.db.QueryContext(ctx, `SELECT run, step, token FROM effects`)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	counts, tokens := map[[2]string]int{}, map[string]bool{}
	for rows.Next() {
		var run, step, token string
		if err := rows.Scan(&run, &step, &token); err != nil {
			return nil, nil, err
		}
		counts[[2]string{run, step}]++
		tokens[token] = true
	}
	return counts, tokens, rows.Err()
}

// StepName is the name of step i.
func StepName(i int) string { return "s" + strconv.Itoa(i) }

// NewJob is the chaos job writing to fx.
func NewJob(fx *Effects) *jobs.Job[Input, []string] {
	return jobs.MustDefine(JobName, func(in Input) string { return fmt.Sprint(in.N) }, jobs.NoTenant[Input](),
		func(c *jobs.Ctx, in Input) ([]string, error) {
			run := c.Run().RunID
			out := make([]string, 0, in.Steps)
			for i := 1; i <= in.Steps; i++ {
				tok, err := jobs.Step(c, StepName(i), func(ctx context.Context) (string, error) {
					tok, err := fx.write(ctx, run, StepName(i))
					if err != nil {
						return "", err
					}
					time.Sleep(time.Duration(in.Linger) * time.Millisecond)
					return tok, nil
				})
				if err != nil {
					return nil, err
				}
				out = append(out, tok)
			}
			return out, nil
		},
		// Many attempts: a chaos run must never be dead-lettered by the harness itself; the
		// report counts every attempt spent instead.
		jobs.Retry(jobs.RetryPolicy{Attempts: 100, Delay: 100 * time.Millisecond, MaxDelay: time.Second}))
}
