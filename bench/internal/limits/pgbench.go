// Package limits measures the two reference ceilings the systems are read against: Postgres'
// one-row commit rate (pgbench) and SQLite's (a raw insert loop).
package limits

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ultimat3/jobs/bench/internal/measure"
	"github.com/ultimat3/jobs/bench/internal/record"
)

// pgbenchScript inserts one row per transaction. The key range is wide enough that unique
// violations never happen in practice; pgbench 15 would abort a client on one and silently
// lower the figure.
const pgbenchScript = `\set k random(1, 9000000000000000000)
INSERT INTO ins (k, c) VALUES (:k, :client_id);
`

// PgbenchTable is the target of the script: a two-column primary key, so each commit writes a
// heap tuple and an index entry, as a job row would.
const PgbenchTable = `CREATE TABLE ins (k bigint NOT NULL, c int NOT NULL, PRIMARY KEY (k, c))`

var (
	tpsRE       = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)
	processedRE = regexp.MustCompile(`number of transactions actually processed: (\d+)`)
	failedRE    = regexp.MustCompile(`number of failed transactions: (\d+)`)
)

// Pgbench is what one pgbench run needs.
type Pgbench struct {
	Bin     string    // path to pgbench
	DBURL   string    // URL of the database holding table ins
	DB      string    // its name, for pg_stat_database
	Admin   *pgx.Conn // connection to another database, for statistics and CHECKPOINT
	Clients int
	Seconds int
	WorkDir string // where the script file is written
	// Postmaster is the local server's pid, for its CPU share (0 if unknown).
	Postmaster int
}

// Run truncates the table, checkpoints, runs pgbench once and returns the sample. A run in which
// any client aborted or any transaction failed is returned as an error: its tps would understate
// the ceiling.
func (p Pgbench) Run(ctx context.Context) (record.Sample, error) {
	s := record.Sample{Scenario: record.ScenarioPgbench, System: "pgbench", Label: "pgbench one-row INSERT", Concurrency: p.Clients}

	script := filepath.Join(p.WorkDir, "insert.sql")
	if err := os.WriteFile(script, []byte(pgbenchScript), 0o644); err != nil {
		return s, err
	}
	if err := p.prepare(ctx); err != nil {
		return s, err
	}
	before, err := measure.ReadDBStats(ctx, p.Admin, p.DB)
	if err != nil {
		return s, err
	}

	// Two threads at most: there are two cores, and pgbench itself shares them with Postgres.
	threads := min(p.Clients, 2)
	cmd := exec.CommandContext(ctx, p.Bin, "-n", "-M", "prepared", "-f", script,
		"-c", strconv.Itoa(p.Clients), "-j", strconv.Itoa(threads), "-T", strconv.Itoa(p.Seconds), p.DBURL)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr

	win, err := measure.StartWindow(p.Postmaster, os.Getpid())
	if err != nil {
		return s, err
	}
	runErr := cmd.Run()
	u := win.Stop()
	wall := u.Wall
	s.MachineCPU, s.PostgresCPU, s.ForeignCPU = u.Machine, u.Postgres, u.Foreign
	// The load generator here is pgbench, not this process.
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok && ru != nil {
		s.LoadCPU = measure.ShareOfMachine(measure.RusageCPU(ru), wall)
	}
	if runErr != nil {
		return s, fmt.Errorf("pgbench: %v: %s", runErr, tail(stderr.String()))
	}
	if strings.Contains(stderr.String(), "aborted") {
		return s, fmt.Errorf("pgbench client aborted: %s", tail(stderr.String()))
	}
	out := stdout.String()
	m := tpsRE.FindStringSubmatch(out)
	n := processedRE.FindStringSubmatch(out)
	if m == nil || n == nil {
		return s, fmt.Errorf("pgbench output not understood: %s", tail(out))
	}
	if f := failedRE.FindStringSubmatch(out); f != nil && f[1] != "0" {
		return s, fmt.Errorf("pgbench: %s failed transactions", f[1])
	}
	s.Rate, _ = strconv.ParseFloat(m[1], 64)
	s.Units, _ = strconv.Atoi(n[1])
	if s.Rate > 0 {
		s.Seconds = float64(s.Units) / s.Rate
	}

	if err := measure.WaitIdle(ctx, p.Admin, p.DB, 15*time.Second); err != nil {
		s.Note = err.Error()
	}
	after, err := measure.ReadDBStats(ctx, p.Admin, p.DB)
	if err != nil {
		return s, err
	}
	d := after.Sub(before)
	s.PG = &d
	return s, nil
}

// prepare empties the table and checkpoints, so each run starts from the same state and none
// pays for a checkpoint that an earlier one caused. The connection used is closed and its
// backend gone before the baseline is read, so the TRUNCATE is not counted.
func (p Pgbench) prepare(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, p.DBURL)
	if err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, `TRUNCATE ins`); err != nil {
		conn.Close(ctx)
		return err
	}
	conn.Close(ctx)
	if _, err := p.Admin.Exec(ctx, `CHECKPOINT`); err != nil {
		return err
	}
	return measure.WaitIdle(ctx, p.Admin, p.DB, 15*time.Second)
}

// tail keeps the end of a long output for an error message.
func tail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 600 {
		s = "…" + s[len(s)-600:]
	}
	return strings.ReplaceAll(s, "\n", " | ")
}
