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
			"A backfill declared per tenant keeps its ledger, its gate and its live pass per (name, tenant):\n" +
			"NAME and --write need --tenant; --all takes such a backfill only with --tenant (for that tenant)\n" +
			"and says it skipped it otherwise; --pending lists each tenant that had a pass, and with --tenant\n" +
			"gives that tenant's state; --list --tenant shows that tenant's passes.\n\n" +
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
	f.StringVar(&o.tenant, "tenant", "", "the tenant of a per-tenant backfill's pass (NAME, --all, --pending, --list)")
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
	if o.tenant != "" {
		return backfillPendingFor(cmd, c, o, rep)
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
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", cell(r.Name, identWidth), cell(r.State, 0), cell(orDash(r.RunID), 0), checksumCell(r))
				// A per-tenant backfill's state is the worst of its tenants': each tenant that
				// had a pass, under it (a tenant that never had one is not known here).
				for _, ts := range r.Tenants {
					fmt.Fprintf(tw, "  tenant %s:\t%s\t%s\t\n", cell(ts.Tenant, identWidth), cell(ts.State, 0), cell(orDash(ts.RunID), 0))
				}
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

func checksumCell(r backfill.PendingRow) string {
	sum := cell(r.Checksum, 0)
	if r.LedgerChecksum != "" {
		sum += " (last pass: " + cell(r.LedgerChecksum, 0) + ")"
	}
	return sum
}

// tenantReport is `backfill --pending --tenant T --json`: the report as tenant T reads it.
type tenantReport struct {
	backfill.Report
	Tenant string `json:"tenant"`
}

// backfillPendingFor is `backfill --pending --tenant T`: each backfill's state for tenant T
// (backfill.Report.TenantState: a per-tenant backfill's for that tenant, pending when it never
// had a pass; a backfill of every tenant's own), and exit 1 when one is pending or failed there.
func backfillPendingFor(cmd *cobra.Command, c *api.Client, o *backfillOptions, rep backfill.Report) error {
	decls, err := c.DeclaredBackfills(cmd.Context())
	if err != nil {
		return err
	}
	perTenant := map[string]bool{}
	for _, d := range decls {
		perTenant[d.Name] = d.Tenant == "input"
	}
	out := tenantReport{Report: backfill.Report{Environment: rep.Environment, Rows: make([]backfill.PendingRow, 0, len(rep.Rows)),
		Pending: []string{}, Orphaned: rep.Orphaned}, Tenant: o.tenant}
	for _, r := range rep.Rows {
		row := r
		row.State, row.RunID, row.Tenants = rep.TenantState(r.Name, o.tenant), r.RunID, nil
		if pt, known := perTenant[r.Name]; pt || (!known && r.Tenants != nil) {
			row.RunID = ""
			for _, ts := range r.Tenants {
				if ts.Tenant == o.tenant {
					row.RunID = ts.RunID
				}
			}
			row.Tenants = []backfill.TenantState{{Tenant: o.tenant, State: row.State, RunID: row.RunID}}
		}
		if row.State == backfill.StatePending || row.State == backfill.StateFailed {
			out.Pending = append(out.Pending, r.Name)
		}
		out.Rows = append(out.Rows, row)
	}
	w := cmd.OutOrStdout()
	if o.json {
		if err := printJSON(w, out); err != nil {
			return err
		}
	} else {
		if len(out.Rows) == 0 {
			fmt.Fprintln(w, "no backfills are declared to this engine")
		} else {
			tw := newTable(w)
			fmt.Fprintln(tw, "BACKFILL\tTENANT\tSTATE\tRUN\tCHECKSUM")
			for _, r := range out.Rows {
				tenant := "-" // one pass sweeps every tenant
				if r.Tenants != nil {
					tenant = cell(o.tenant, identWidth)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", cell(r.Name, identWidth), tenant, cell(r.State, 0), cell(orDash(r.RunID), 0),
					checksumCell(r))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
		}
		if len(out.Orphaned) > 0 {
			names := make([]string, len(out.Orphaned))
			for i, n := range out.Orphaned {
				names[i] = cell(n, identWidth)
			}
			fmt.Fprintf(w, "\nin the ledger but no longer declared: %s\n", strings.Join(names, ", "))
		}
	}
	if len(out.Pending) > 0 {
		return jobs.Errorf(jobs.CodeBackfillPending, "%d unswept in environment %q for tenant %q: %s", len(out.Pending),
			out.Environment, o.tenant, strings.Join(out.Pending, ", "))
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
	ps, err := c.Backfills(cmd.Context(), store.BackfillFilter{Name: o.name, Tenant: o.tenant, Status: o.status, Limit: o.limit})
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
	fmt.Fprintln(tw, "BACKFILL\tTENANT\tRUN\tSTATUS\tROWS\tROWS/S\tLEFT\tETA\tCURSOR\tSTARTED")
	for _, p := range ps {
		left, eta := "-", "-"
		if p.Left != nil {
			left = fmt.Sprint(*p.Left)
			switch {
			case p.ETA > 0:
				eta = p.ETA.String()
			case *p.Left > 0:
				eta = "unknown" // no row done yet: no rate to estimate from
			}
		}
		// TENANT is a per-tenant backfill's pass's tenant; "-" for a pass over every tenant.
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%.1f\t%s\t%s\t%s\t%s\n", cell(p.Name, identWidth), cell(orDash(p.Tenant), identWidth),
			cell(p.RunID, 0), cell(p.Status, 0), p.Rows, p.RowsPerSecond, left, eta, cell(orDash(p.Cursor), 30), ago(now, p.StartedAt))
	}
	return tw.Flush()
}

// dryRun is one backfill's verdict.
type dryRun struct {
	Name string `json:"name"`
	// Tenant is the tenant of a per-tenant backfill's pass: its verdict, count and last pass are
	// that tenant's.
	Tenant  string `json:"tenant,omitempty"`
	Run     bool   `json:"run"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
	// Skipped is set by --all without --tenant on a per-tenant backfill: it was neither gated
	// nor enqueued (Message says why), and it fails nothing.
	Skipped bool `json:"skipped,omitempty"`
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
	results := []dryRun{} // --json prints [] when nothing is pending, as every listing does
	if o.all {
		rep, err := c.PendingBackfills(ctx, o.env)
		if err != nil {
			return err
		}
		var skipped []dryRun
		todo, skipped = o.allPending(decls, rep)
		results = append(results, skipped...)
	} else {
		for _, d := range decls {
			if d.Name == name {
				todo = append(todo, d)
			}
		}
		if len(todo) == 0 {
			return jobs.Errorf(jobs.CodeJobUnknown, "no backfill named %q is declared to this engine", name)
		}
		if todo[0].Tenant != "input" && o.tenant != "" {
			// Not ignored: a pass of this backfill sweeps every tenant, which --tenant says is
			// not what was meant.
			return cli.Usage("backfill %q is declared for every tenant: one pass sweeps them all; drop --tenant", name)
		}
	}
	// Each name on its own: a refusal or a failure is reported and the next name still runs.
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
		if len(todo) == 1 {
			// The message already starts with its code (it is the error's text): once on stderr.
			r := results[len(results)-1]
			return jobs.Errorf(jobs.Code(r.Code), "%s", strings.TrimPrefix(r.Message, r.Code+": "))
		}
		return jobs.Errorf(jobs.Code(firstCode(results)), "%d of %d backfills refused or failed", failed, len(todo))
	}
	return nil
}

// allPending is what --all takes: each backfill of every tenant the report names pending (or
// failed); with --tenant, each per-tenant backfill pending or failed for that tenant
// (Report.TenantState: a tenant that never had a pass is pending, even when the report reads the
// name completed from its other tenants). Without --tenant, a per-tenant backfill is skipped,
// and said so: its ledger is per tenant, and the engine does not know the application's tenants.
func (o *backfillOptions) allPending(decls []backfill.Declaration, rep backfill.Report) (todo []backfill.Declaration, skipped []dryRun) {
	state := map[string]string{}
	for _, r := range rep.Rows {
		state[r.Name] = r.State
	}
	for _, d := range decls {
		switch {
		case d.Tenant != "input":
			for _, p := range rep.Pending {
				if d.Name == p {
					todo = append(todo, d)
				}
			}
		case o.tenant != "":
			if st := rep.TenantState(d.Name, o.tenant); st == backfill.StatePending || st == backfill.StateFailed {
				todo = append(todo, d)
			}
		case state[d.Name] != "" && state[d.Name] != backfill.StateExcluded:
			skipped = append(skipped, dryRun{Name: d.Name, Skipped: true, Message: "declared per tenant, so its ledger and " +
				"its gate are per tenant: skipped without --tenant (run --all --tenant T for each tenant; the engine " +
				"does not know which tenants still need a pass)"})
		}
	}
	return todo, skipped
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
	perTenant := d.Tenant == "input"
	r := dryRun{Name: d.Name}
	if perTenant {
		r.Tenant = o.tenant
	}
	fail := func(err error) dryRun {
		r.Run, r.Code, r.Message = false, string(jobs.CodeOf(err)), err.Error()
		if r.Code == "" {
			r.Code = string(jobs.CodeInternal)
		}
		return r
	}
	// A per-tenant backfill's ledger, gate and live pass are per (name, tenant): its verdict is
	// a tenant's, so a dry run needs the tenant as much as --write does.
	if perTenant && o.tenant == "" {
		return fail(jobs.Errorf(jobs.CodeJobTenantRequired, "backfill %q sweeps one tenant per pass, with a ledger per tenant: name it with --tenant", d.Name))
	}
	// The passes of this scope only: a per-tenant backfill's of the tenant asked for (another
	// tenant's completed pass says nothing of this tenant's rows), one of every tenant's of no
	// tenant, as the pass's own gate reads them (engine.BackfillOpen).
	scope := store.BackfillFilter{Name: d.Name, Tenant: r.Tenant, NoTenant: !perTenant}
	all := scope
	all.Limit = 100
	passes, err := c.Backfills(ctx, all)
	if err != nil {
		return fail(err)
	}
	// The newest completed pass, however many passes came after it.
	newestDone := scope
	newestDone.Status, newestDone.Limit = backfill.StatusCompleted, 1
	done, err := c.Backfills(ctx, newestDone)
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
	in := backfill.Input{Force: o.force, Tenant: r.Tenant}
	input, err := jobs.Encode(in)
	if err != nil {
		return fail(err)
	}
	// The pass's own key (name/tenant for a per-tenant backfill), so a live pass of this tenant,
	// enqueued here or by the application, is found, and another tenant's does not refuse it.
	req := jobs.EnqueueRequest{Job: d.Name, Queue: d.Queue, Input: input, Key: d.Key(in.Tenant), Tenant: in.Tenant,
		NoTenant: !perTenant, EnqueuedBy: whoami()}
	res, err := c.Enqueue(ctx, req)
	if err != nil {
		return fail(err)
	}
	r.RunID, r.Deduped = res.RunID, res.Deduped
	return r
}

func printDryRun(w io.Writer, r dryRun, write bool) {
	name := cell(r.Name, 0)
	if r.Tenant != "" {
		name += " (tenant " + cell(r.Tenant, 0) + ")"
	}
	switch {
	case r.Skipped:
		fmt.Fprintf(w, "%s: skipped: %s\n", name, errorCell(r.Message, true))
		return
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
	tenant := "- (a pass over every tenant)"
	if p.Tenant != "" {
		tenant = cell(p.Tenant, 0)
	}
	fmt.Fprintf(w, "  tenant:  %s\n", tenant)
	fmt.Fprintf(w, "  status:  %s\n  rows:    %d in %d batches, %.1f rows/s\n", cell(p.Status, 0), p.Rows, p.Batches, p.RowsPerSecond)
	if p.Left != nil {
		// The ETA is zero when it cannot be estimated (no row done yet) or nothing is left: it is
		// never shown as 0s.
		switch {
		case p.ETA > 0:
			fmt.Fprintf(w, "  left:    %d of %d (ETA %s)\n", *p.Left, p.Total, p.ETA)
		case *p.Left > 0:
			fmt.Fprintf(w, "  left:    %d of %d (ETA unknown)\n", *p.Left, p.Total)
		default:
			fmt.Fprintf(w, "  left:    %d of %d\n", *p.Left, p.Total)
		}
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
