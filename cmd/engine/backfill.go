package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"
	_ "modernc.org/sqlite" // the "sqlite" driver, for an application's migrations ledger

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/backfill"
	"github.com/ultimat3/jobs/backfill/migrations"
	"github.com/ultimat3/jobs/cmd/internal/cli"
	"github.com/ultimat3/jobs/store"
)

// backfillOptions are the flags of `engine backfill`.
type backfillOptions struct {
	pending, list, all, write, force, json bool
	env, tenant                            string
	name, status                           string
	limit                                  int
	migrations, migrationsKind, migTable   string
}

func newBackfillCmd() *cobra.Command {
	var co clientOptions
	var o backfillOptions
	cmd := &cobra.Command{
		Use:   "backfill [NAME] [--write [--force]] | --all [--write] | --pending | --list",
		Short: "Dry-run, enqueue and watch backfills",
		Long: "backfill NAME is a dry run: the gate's verdict (environment, then the required migration,\n" +
			"then whether it already completed) and what the last pass counted. --write enqueues the pass\n" +
			"(it never runs inline: the workers sweep); --force sweeps a completed name again, into a new\n" +
			"ledger row. --all takes every pending backfill, each on its own, and goes on past a refusal.\n" +
			"--pending lists declared backfills not yet swept here and exits 1 when there is one.\n" +
			"--list shows the ledger: rows, rows/s and, with a count, rows left and an ETA.\n\n" +
			"Exit codes: 0 ok; 1 refused, failed, or (with --pending) something is unswept; 2 usage.",
		Args: cobra.MaximumNArgs(1),
		RunE: co.withClient(func(cmd *cobra.Command, args []string, c *api.Client) error {
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			modes := 0
			for _, on := range []bool{o.pending, o.list, o.all, name != ""} {
				if on {
					modes++
				}
			}
			if modes != 1 {
				return cli.Usage("name one backfill, or one of --all, --pending, --list")
			}
			if (o.write || o.force) && (o.pending || o.list) {
				return cli.Usage("--write and --force go with a name or --all")
			}
			if o.force && !o.write {
				return cli.Usage("--force needs --write: a dry run writes nothing")
			}
			switch {
			case o.pending:
				return backfillPending(cmd, c, &o)
			case o.list:
				return backfillList(cmd, c, &o)
			}
			return backfillRun(cmd, c, &o, name)
		}),
	}
	co.flags(cmd)
	f := cmd.Flags()
	f.BoolVar(&o.pending, "pending", false, "declared backfills not yet swept in this environment; exit 1 when any")
	f.BoolVar(&o.list, "list", false, "the ledger: one row per pass, newest first")
	f.BoolVar(&o.all, "all", false, "every pending backfill, each on its own")
	f.BoolVar(&o.write, "write", false, "enqueue the pass (without it, a dry run)")
	f.BoolVar(&o.force, "force", false, "sweep a completed backfill again, into a new ledger row")
	f.BoolVar(&o.json, "json", false, "print JSON")
	f.StringVar(&o.env, "env", cli.Env(backfill.EnvVar, ""), "this environment [$"+backfill.EnvVar+"]")
	f.StringVar(&o.tenant, "tenant", "", "the tenant of a per-tenant backfill's pass")
	f.StringVar(&o.name, "name", "", "--list: only passes of this backfill")
	f.StringVar(&o.status, "status", "", "--list: only passes in this status (running, completed, failed)")
	f.IntVar(&o.limit, "limit", 50, "--list: at most this many passes (1-10000)")
	f.StringVar(&o.migrations, "migrations", cli.Env("JOBS_MIGRATIONS", ""), "the application's database, to check requires: postgres://… or sqlite:PATH [$JOBS_MIGRATIONS]")
	f.StringVar(&o.migrationsKind, "migrations-kind", "golang-migrate", "its migrations ledger: golang-migrate or goose")
	f.StringVar(&o.migTable, "migrations-table", "", "the ledger's table (default schema_migrations / goose_db_version)")
	return cmd
}

func backfillPending(cmd *cobra.Command, c *api.Client, o *backfillOptions) error {
	rep, err := c.PendingBackfills(cmd.Context(), o.env)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if o.json {
		if err := printJSON(out, rep); err != nil {
			return err
		}
	} else {
		if len(rep.Rows) == 0 {
			fmt.Fprintln(out, "no backfills are declared to this engine")
		} else {
			tw := newTable(out)
			fmt.Fprintln(tw, "BACKFILL\tSTATE\tRUN\tCHECKSUM")
			for _, r := range rep.Rows {
				sum := cell(r.Checksum, 0)
				if r.LedgerChecksum != "" {
					sum += " (last pass: " + cell(r.LedgerChecksum, 0) + ")"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", cell(r.Name, identWidth), cell(r.State, 0), cell(orDash(r.RunID), 0), sum)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
		}
		if len(rep.Orphaned) > 0 {
			names := make([]string, len(rep.Orphaned))
			for i, n := range rep.Orphaned {
				names[i] = cell(n, identWidth)
			}
			fmt.Fprintf(out, "\nin the ledger but no longer declared: %s\n", strings.Join(names, ", "))
		}
	}
	if rep.Unswept() {
		return jobs.Errorf(jobs.CodeBackfillPending, "%d unswept in environment %q: %s", len(rep.Pending), rep.Environment,
			strings.Join(rep.Pending, ", "))
	}
	return nil
}

func backfillList(cmd *cobra.Command, c *api.Client, o *backfillOptions) error {
	if o.limit < 1 || o.limit > 10_000 {
		return cli.Usage("--limit %d: want 1 to 10000", o.limit)
	}
	switch o.status {
	case "", backfill.StatusRunning, backfill.StatusCompleted, backfill.StatusFailed:
	default:
		return cli.Usage("--status %q: want running, completed or failed", o.status)
	}
	ps, err := c.Backfills(cmd.Context(), store.BackfillFilter{Name: o.name, Status: o.status, Limit: o.limit})
	if err != nil {
		return err
	}
	if o.json {
		if ps == nil {
			ps = []backfill.Progress{} // [], as every listing prints none
		}
		return printJSON(cmd.OutOrStdout(), struct {
			Backfills []backfill.Progress `json:"backfills"`
		}{ps})
	}
	if len(ps) == 0 {
		fmt.Fprintln(cmd.OutOrStdout(), "no backfill passes")
		return nil
	}
	return printBackfills(cmd.OutOrStdout(), time.Now(), ps)
}

// printBackfills is the ledger's table: `backfill --list` and the passes in flight of `jobs ls`.
func printBackfills(w io.Writer, now time.Time, ps []backfill.Progress) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "BACKFILL\tRUN\tSTATUS\tROWS\tROWS/S\tLEFT\tETA\tCURSOR\tSTARTED")
	for _, p := range ps {
		left, eta := "-", "-"
		if p.Left != nil {
			left = fmt.Sprint(*p.Left)
			if p.ETA > 0 {
				eta = p.ETA.String()
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.1f\t%s\t%s\t%s\t%s\n", cell(p.Name, identWidth), cell(p.RunID, 0), cell(p.Status, 0),
			p.Rows, p.RowsPerSecond, left, eta, cell(orDash(p.Cursor), 30), ago(now, p.StartedAt))
	}
	return tw.Flush()
}

// dryRun is one backfill's verdict.
type dryRun struct {
	Name    string `json:"name"`
	Run     bool   `json:"run"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
	// Migration is what the migrations ledger said of requires: applied, pending or unknown.
	Migration string `json:"migration,omitempty"`
	// Count is what the newest pass counted at its start, and what it had left; nil before any
	// pass counted (the engine runs no application code: a count is the pass's to take).
	Count   *passCount         `json:"count"`
	Last    *backfill.Progress `json:"last,omitempty"`
	RunID   string             `json:"runId,omitempty"`
	Deduped bool               `json:"deduped,omitempty"`
}

type passCount struct {
	Total int64  `json:"total"`
	Left  *int64 `json:"left,omitempty"`
	RunID string `json:"runId"`
}

func backfillRun(cmd *cobra.Command, c *api.Client, o *backfillOptions, name string) error {
	ctx := cmd.Context()
	// The application's database first: a wrong --migrations is a usage error whatever the
	// engine holds (opening it connects to nothing yet).
	ledger, err := o.migrationLedger(ctx)
	if err != nil {
		return err
	}
	if ledger != nil {
		defer ledger.close()
	}
	decls, err := c.DeclaredBackfills(ctx)
	if err != nil {
		return err
	}
	var todo []backfill.Declaration
	if o.all {
		rep, err := c.PendingBackfills(ctx, o.env)
		if err != nil {
			return err
		}
		for _, d := range decls {
			for _, p := range rep.Pending {
				if d.Name == p {
					todo = append(todo, d)
				}
			}
		}
	} else {
		for _, d := range decls {
			if d.Name == name {
				todo = append(todo, d)
			}
		}
		if len(todo) == 0 {
			return jobs.Errorf(jobs.CodeJobUnknown, "no backfill named %q is declared to this engine", name)
		}
	}
	// Each name on its own: a refusal or a failure is reported and the next name still runs.
	results := []dryRun{} // --json prints [] when nothing is pending, as every listing does
	failed := 0
	for _, d := range todo {
		r := o.one(ctx, c, d, ledger)
		if !r.Run || r.Code != "" {
			failed++
		}
		results = append(results, r)
	}
	out := cmd.OutOrStdout()
	if o.json {
		if err := printJSON(out, struct {
			Backfills []dryRun `json:"backfills"`
		}{results}); err != nil {
			return err
		}
	} else {
		for _, r := range results {
			printDryRun(out, r, o.write)
		}
		if len(results) == 0 {
			fmt.Fprintln(out, "nothing pending")
		}
	}
	if failed > 0 {
		if len(results) == 1 {
			return jobs.Errorf(jobs.Code(results[0].Code), "%s", results[0].Message)
		}
		return jobs.Errorf(jobs.Code(firstCode(results)), "%d of %d backfills refused or failed", failed, len(results))
	}
	return nil
}

func firstCode(rs []dryRun) string {
	for _, r := range rs {
		if r.Code != "" {
			return r.Code
		}
	}
	return string(jobs.CodeInternal)
}

// one gates one backfill and, with --write, enqueues it.
func (o *backfillOptions) one(ctx context.Context, c *api.Client, d backfill.Declaration, l *migrationLedger) dryRun {
	r := dryRun{Name: d.Name}
	fail := func(err error) dryRun {
		r.Run, r.Code, r.Message = false, string(jobs.CodeOf(err)), err.Error()
		if r.Code == "" {
			r.Code = string(jobs.CodeInternal)
		}
		return r
	}
	passes, err := c.Backfills(ctx, store.BackfillFilter{Name: d.Name, Limit: 100})
	if err != nil {
		return fail(err)
	}
	// The newest completed pass, however many passes came after it.
	done, err := c.Backfills(ctx, store.BackfillFilter{Name: d.Name, Status: backfill.StatusCompleted, Limit: 1})
	if err != nil {
		return fail(err)
	}
	var completed *backfill.Progress
	if len(done) == 1 {
		completed = &done[0]
	}
	if len(passes) > 0 {
		r.Last = &passes[0]
		for _, p := range passes {
			if p.Total >= 0 {
				r.Count = &passCount{Total: p.Total, Left: p.Left, RunID: p.RunID}
				break
			}
		}
	}
	mig := backfill.MigrationUnknown
	if l != nil && d.Requires != "" {
		mig = backfill.MigrationState(ctx, l.ledger, d.Requires)
	}
	if d.Requires != "" {
		r.Migration = [...]string{"unknown", "applied", "pending"}[mig]
	}
	v := backfill.Gate(backfill.GateInput{Declaration: d, Environment: o.env, Migration: mig, Completed: completed, Force: o.force})
	if !v.Run() {
		return fail(v.Err)
	}
	r.Run = true
	if !o.write {
		return r
	}
	if d.Tenant == "input" && o.tenant == "" {
		return fail(jobs.Errorf(jobs.CodeJobTenantRequired, "backfill %q sweeps one tenant per pass: name it with --tenant", d.Name))
	}
	in := backfill.Input{Force: o.force}
	if d.Tenant == "input" {
		in.Tenant = o.tenant
	}
	input, err := jobs.Encode(in)
	if err != nil {
		return fail(err)
	}
	req := jobs.EnqueueRequest{Job: d.Name, Queue: d.Queue, Input: input, Key: d.Name, Tenant: in.Tenant,
		NoTenant: d.Tenant != "input", EnqueuedBy: whoami()}
	res, err := c.Enqueue(ctx, req)
	if err != nil {
		return fail(err)
	}
	r.RunID, r.Deduped = res.RunID, res.Deduped
	return r
}

func printDryRun(w io.Writer, r dryRun, write bool) {
	name := cell(r.Name, 0)
	switch {
	case !r.Run:
		fmt.Fprintf(w, "%s: refused: %s\n", name, errorCell(r.Message, true))
	case r.RunID != "" && r.Deduped:
		fmt.Fprintf(w, "%s: a pass is already live: run %s\n", name, cell(r.RunID, 0))
	case r.RunID != "":
		fmt.Fprintf(w, "%s: enqueued run %s (the workers sweep it; watch with backfill --list)\n", name, cell(r.RunID, 0))
	case !write:
		fmt.Fprintf(w, "%s: would run (dry run; --write enqueues)\n", name)
	}
	if r.Migration != "" {
		fmt.Fprintf(w, "  requires: migration %s\n", r.Migration)
	}
	if r.Count != nil {
		left := "-"
		if r.Count.Left != nil {
			left = fmt.Sprint(*r.Count.Left)
		}
		fmt.Fprintf(w, "  count: %d at the start of pass %s; left: %s\n", r.Count.Total, cell(r.Count.RunID, 0), left)
	} else if !write {
		fmt.Fprintln(w, "  count: not yet taken (a pass counts when it starts)")
	}
	if r.Last != nil {
		fmt.Fprintf(w, "  last pass: %s %s, %d rows\n", cell(r.Last.RunID, 0), cell(r.Last.Status, 0), r.Last.Rows)
	}
}

// migrationLedger is an opened application database.
type migrationLedger struct {
	ledger backfill.MigrationLedger
	close  func()
}

func (o *backfillOptions) migrationLedger(ctx context.Context) (*migrationLedger, error) {
	if o.migrations == "" {
		return nil, nil
	}
	var q migrations.Querier
	var closer func()
	switch {
	case strings.HasPrefix(o.migrations, "postgres://") || strings.HasPrefix(o.migrations, "postgresql://"):
		pool, err := pgxpool.New(ctx, o.migrations)
		if err != nil {
			return nil, cli.Usage("--migrations: %v", err)
		}
		q, closer = migrations.Pgx(pool), pool.Close
	case strings.HasPrefix(o.migrations, "sqlite:"):
		// The file must exist, and is opened read-only: the driver honours mode=ro only in a
		// file: URI, and without it a mistyped path creates an empty database, whose missing
		// ledger would read as "unknown", which is not a refusal.
		path := strings.TrimPrefix(o.migrations, "sqlite:")
		if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
			return nil, cli.Usage("--migrations: no SQLite database at %q", path)
		}
		db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
		if err != nil {
			return nil, cli.Usage("--migrations: %v", err)
		}
		q, closer = migrations.SQL(db), func() { _ = db.Close() }
	default:
		// Named by its scheme alone: the value may be a connection string with a password.
		if scheme, ok := urlScheme(o.migrations); ok {
			return nil, cli.Usage("--migrations names a %q database: want postgres://… or sqlite:PATH", scheme)
		}
		return nil, cli.Usage("--migrations is not a postgres://… URL or sqlite:PATH (the value is not shown, as it may hold a password)")
	}
	switch o.migrationsKind {
	case "golang-migrate":
		return &migrationLedger{migrations.GolangMigrate{Q: q, Table: o.migTable}, closer}, nil
	case "goose":
		return &migrationLedger{migrations.Goose{Q: q, Table: o.migTable}, closer}, nil
	}
	closer()
	return nil, cli.Usage("--migrations-kind %q: want golang-migrate or goose", o.migrationsKind)
}

// runBackfill is the ledger row of a run, or nil for a run that is no backfill pass.
func runBackfill(ctx context.Context, c *api.Client, runID string) (*backfill.Progress, error) {
	ps, err := c.Backfills(ctx, store.BackfillFilter{RunID: runID, Limit: 1})
	if err != nil || len(ps) == 0 {
		return nil, err
	}
	return &ps[0], nil
}

// printRunBackfill is the backfill section of `jobs show`.
func printRunBackfill(w io.Writer, p *backfill.Progress) error {
	if p == nil {
		return nil
	}
	fmt.Fprintf(w, "\nbackfill %s (checksum %s, app %s)\n", cell(p.Name, 0), cell(p.Checksum, 0), cell(orDash(p.AppVersion), 0))
	fmt.Fprintf(w, "  status:  %s\n  rows:    %d in %d batches, %.1f rows/s\n", cell(p.Status, 0), p.Rows, p.Batches, p.RowsPerSecond)
	if p.Left != nil {
		fmt.Fprintf(w, "  left:    %d of %d (ETA %s)\n", *p.Left, p.Total, p.ETA)
	}
	fmt.Fprintf(w, "  cursor:  %s\n  started: %s\n", cell(orDash(p.Cursor), 0), p.StartedAt.UTC().Format(time.RFC3339))
	if !p.CompletedAt.IsZero() {
		fmt.Fprintf(w, "  completed: %s\n", p.CompletedAt.UTC().Format(time.RFC3339))
	}
	if p.Error != "" {
		fmt.Fprintf(w, "  error:   %s\n", errorCell(p.Error, true))
	}
	return nil
}
