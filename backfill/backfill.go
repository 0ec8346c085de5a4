// Package backfill sweeps every row a keyset source matches, once, as a job: a backfill is a
// factory over jobs.Define, not a new primitive, so a pass has the retry policy, the queue, the
// cancellation and the dead-letter path every job has.
//
// Each page is handled inside its own durable step, batch:0, batch:1, …, whose recorded output
// is the checkpoint: the cursor after the page and the running row count, never the rows. A run
// killed mid-pass resumes on the page it stopped at: completed pages replay from history without
// a statement. The rate's pause is spent inside the step, so a resumed attempt re-pays none of the
// old pauses, and it ends at once when the run is cancelled.
//
// Beside the run, a ledger in the engine's store keeps one row per pass (name, tenant, checksum,
// status, rows, cursor, run): a report of what has been swept, which also makes a completed name
// a no-op until it is forced. A backfill declared PerTenant is swept, gated and reported per
// tenant: one tenant's completed pass is no other tenant's. The ledger is never where a pass
// resumes from.
package backfill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"sync"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/freetext"
)

// Defaults of the optional declarations.
const (
	DefaultBatch = 1000
	// DefaultRate is batches per second: 5,000 rows/s at the default batch, one statement every
	// 200ms, so the database spends the rest of each interval on the app.
	DefaultRate = 5.0
)

// ProgressEvery bounds how often a pass reports its progress to the ledger (the first page of an
// attempt always reports, and so does the end of the pass).
const ProgressEvery = time.Second

// Input is a pass's input.
type Input struct {
	// Force sweeps again a name that already completed, into a new ledger row.
	Force bool `json:"force,omitempty"`
	// Tenant is the tenant a per-tenant backfill sweeps; empty for one declared AllTenants.
	Tenant string `json:"tenant,omitempty"`
}

// Result is a pass's result.
type Result struct {
	Name    string `json:"name"`
	Batches int64  `json:"batches"`
	Rows    int64  `json:"rows"`
	// Skipped is true when the name had already completed (for the pass's tenant, when the
	// backfill is per tenant) and the pass was not forced; then PreviousRunID is the pass that
	// completed it.
	Skipped       bool   `json:"skipped,omitempty"`
	PreviousRunID string `json:"previousRunId,omitempty"`
	// Warnings: a moved checksum, a ledger that could not be written.
	Warnings []string `json:"warnings,omitempty"`
}

// Checkpoint is a page step's recorded output: where the pass stands after the page.
type Checkpoint struct {
	Cursor Cursor `json:"cursor"`
	// Zones keeps the zone of each time in Cursor that is not UTC (the codec keeps a time's
	// instant only), so the next page is asked after the cursor as the source returned it. A
	// checkpoint recorded without it reads its times in UTC.
	Zones []CursorZone `json:"zones,omitempty"`
	Rows  int64        `json:"rows"`
	Done  bool         `json:"done,omitempty"`
}

// LedgerCursor is the cursor text a ledger row shows for cp, as a checkpoint's codec read it
// back: its times in their zones, cut as the pass cuts it. The engine rewinds a row to it when a
// retry from an earlier page discards the pages recorded since.
func (cp Checkpoint) LedgerCursor() string {
	return cursorText(withZones(normalDecoded(cp.Cursor), cp.Zones))
}

// Batch is what a handler gets: the page's rows. It gets no way to declare steps: a step named
// inside it would collide with itself on the next page (X_STEP_DUPLICATE).
type Batch[Row any] struct {
	Rows []Row
	// Index is the page's number (its step is batch:<Index>).
	Index int
	// Tenant is the tenant the pass sweeps; "" for every tenant.
	Tenant string
}

// Tenant says which tenant a pass acts under, as on a job: PerTenant (the input names it, and
// every page is scoped to it) or AllTenants (no tenant: the pass sweeps every tenant and opens
// that scope itself). The zero value is refused with X_JOB_TENANT_REQUIRED.
type Tenant struct{ mode string }

// PerTenant scopes each pass to the tenant of its input (Input.Tenant).
func PerTenant() Tenant { return Tenant{"input"} }

// AllTenants declares a backfill of no tenant: one pass sweeps every tenant.
func AllTenants() Tenant { return Tenant{"none"} }

// Option sets an optional declaration.
type Option func(*config) error

type config struct {
	batch        int
	rate         float64
	requires     string
	migrations   MigrationLedger
	environments []string
	count        func(ctx context.Context, req CountRequest) (int64, error)
	version      string
	jobOpts      []jobs.Option
	overlap      bool
}

// BatchSize sets the rows per page (one statement and one step each). Default 1,000; must be ≥ 1.
func BatchSize(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return jobs.Errorf(jobs.CodeJobDefinition, "batch must be at least 1, got %d", n)
		}
		c.batch = n
		return nil
	}
}

// Rate sets the pace in batches per second (fractions allowed: 0.5 is a page every two seconds).
// Default 5. There is no way off: a rate above what the pages achieve produces no wait, so a fast
// sweep is a high number. NaN, infinite, zero and negative rates are refused, and so is a rate so
// low that its interval between pages is longer than a time.Duration holds (a page in more than
// about 292 years): the interval would overflow to a negative one, and the pass would run
// unthrottled.
func Rate(perSecond float64) Option {
	return func(c *config) error {
		if math.IsNaN(perSecond) || math.IsInf(perSecond, 0) || perSecond <= 0 {
			return jobs.Errorf(jobs.CodeJobDefinition, "rate must be a finite number of batches per second above 0, got %v", perSecond)
		}
		if !(float64(time.Second)/perSecond < float64(math.MaxInt64)) {
			return jobs.Errorf(jobs.CodeJobDefinition, "rate %v is a page every %.0f years, longer than a pause can last: it must be above %.4g batches per second",
				perSecond, 1/perSecond/(365.25*24*3600), minRate)
		}
		c.rate = perSecond
		return nil
	}
}

// minRate is one page per time.Duration's longest span (about 292 years): Rate refuses it and
// any lower rate, whose interval would overflow.
const minRate = float64(time.Second) / float64(math.MaxInt64)

// Requires names a migration the backfill waits on. The CLI checks it against the application's
// migrations ledger before enqueueing; with Migrations, the pass checks it too.
func Requires(migrationID string) Option {
	return func(c *config) error {
		if migrationID == "" {
			return jobs.Errorf(jobs.CodeJobDefinition, "requires names no migration")
		}
		c.requires = migrationID
		return nil
	}
}

// Migrations gives the pass the application's migrations ledger, so it checks Requires itself
// (a pass enqueued from app code passes no CLI). An unreadable ledger is not a refusal.
func Migrations(l MigrationLedger) Option {
	return func(c *config) error { c.migrations = l; return nil }
}

// Environments lists the environments the backfill may run in; omitted, it runs in every one.
func Environments(envs ...string) Option {
	return func(c *config) error {
		if len(envs) == 0 {
			return jobs.Errorf(jobs.CodeJobDefinition, "environments lists none")
		}
		for _, e := range envs {
			if e == "" {
				return jobs.Errorf(jobs.CodeJobDefinition, "environments holds an empty name")
			}
		}
		c.environments = append([]string(nil), envs...)
		return nil
	}
}

// Count declares how many rows the source's predicate still matches. After the last page the
// pass counts once: above zero is X_BACKFILL_STALLED (the source and the count disagree, which a
// retry cannot fix), negative is X_INVARIANT. The count also feeds rows-left and the ETA.
//
// fn is not told the pass's tenant, so it fits a backfill declared AllTenants. A PerTenant
// backfill declares its count with CountFor, which is: a count of every tenant's rows would still
// match the other tenants' rows after one tenant's pass, and fail it with X_BACKFILL_STALLED.
// (fn's context is the run's, so jobs.ActorFrom(ctx) names the tenant too; CountFor says it in
// the signature.)
func Count(fn func(ctx context.Context) (int64, error)) Option {
	return func(c *config) error {
		if fn == nil {
			return jobs.Errorf(jobs.CodeJobDefinition, "count is nil")
		}
		c.count = func(ctx context.Context, _ CountRequest) (int64, error) { return fn(ctx) }
		return nil
	}
}

// CountFor is Count for a count that is told the pass's scope (CountRequest): the tenant of a
// PerTenant backfill's pass, "" for one declared AllTenants. A per-tenant count MUST count that
// tenant's rows only, the rows the source pages with PageRequest.Tenant: the check after the last
// page compares it with zero, so a count that also matches other tenants' rows fails the pass
// with X_BACKFILL_STALLED. keyset.CountSQLFor and keyset.CountPgxFor pass the tenant to the query
// as its last argument.
//
//	backfill.CountFor(keyset.CountPgxFor(pool, `SELECT count(*) FROM invoices WHERE currency IS NULL AND org_id = $1`))
func CountFor(fn func(ctx context.Context, req CountRequest) (int64, error)) Option {
	return func(c *config) error {
		if fn == nil {
			return jobs.Errorf(jobs.CodeJobDefinition, "count is nil")
		}
		c.count = fn
		return nil
	}
}

// Version is the author's revision of the definition, folded into the checksum: Go cannot hash a
// function's text, so a handler whose meaning changed says so here.
func Version(v string) Option {
	return func(c *config) error { c.version = v; return nil }
}

// OverlapCheckpoints lets a sweep bound by its statements (not by its rate) start a page's
// handler while the previous page's checkpoint commits, instead of after: the checkpoint's commit
// leaves the pages' critical path, which then holds the same two statements a page as a
// hand-written loop. The price is what a crash costs: the pages handled since the last committed
// checkpoint are handled again, and with this option that is at most two pages instead of one.
// A page is never handled again once its own checkpoint committed, and a page's checkpoint is
// still recorded only after its handler returned and the previous checkpoint committed. Off by
// default.
func OverlapCheckpoints() Option {
	return func(c *config) error { c.overlap = true; return nil }
}

// JobOptions passes options to the underlying job (Queue, Retry, Timeout, StepTimeout).
func JobOptions(opts ...jobs.Option) Option {
	return func(c *config) error { c.jobOpts = append(c.jobOpts, opts...); return nil }
}

// Backfill is a declared backfill: a job (it implements jobs.Definition, so it is registered on a
// worker like any job) plus its declaration.
type Backfill[Row any] struct {
	*jobs.Job[Input, Result]
	decl   Declaration
	cfg    config
	source Source[Row]
	handle func(ctx context.Context, b Batch[Row]) error
}

// Define declares a backfill. name is required and is also the idempotency key of its runs
// (Declaration.Key): re-enqueueing a live pass returns that pass. A PerTenant backfill's key is the
// name and the tenant, chosen when keys were unique per job across tenants; keys are now held per
// (job, tenant, key), and the key stays as it was so that passes enqueued before and after dedupe
// alike. tenant is required as on a job.
//
//	var Slugs = backfill.MustDefine("rewrite-slugs", backfill.AllTenants(),
//		keyset.SQL(db, keyset.Query{Table: "posts", Keys: []string{"id"}, Columns: []string{"id", "title"}}, scanPost),
//		func(ctx context.Context, b backfill.Batch[Post]) error { return saveSlugs(ctx, b.Rows) },
//		backfill.Rate(20))
func Define[Row any](name string, tenant Tenant, source Source[Row], handle func(ctx context.Context, b Batch[Row]) error, opts ...Option) (*Backfill[Row], error) {
	if name == "" {
		return nil, jobs.Errorf(jobs.CodeJobDefinition, "backfill name is empty")
	}
	if tenant.mode == "" {
		return nil, jobs.Errorf(jobs.CodeJobTenantRequired, "backfill %q declares no tenant: use backfill.PerTenant() or backfill.AllTenants()", name)
	}
	if source == nil || handle == nil {
		return nil, jobs.Errorf(jobs.CodeJobDefinition, "backfill %q needs a source and a handler", name)
	}
	cfg := config{batch: DefaultBatch, rate: DefaultRate}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			if e, ok := err.(*jobs.Error); ok {
				e.Message = fmt.Sprintf("backfill %q: %s", name, e.Message)
			}
			return nil, err
		}
	}
	b := &Backfill[Row]{cfg: cfg, source: source, handle: handle}
	jt := jobs.NoTenant[Input]()
	if tenant.mode == "input" {
		jt = jobs.TenantFrom(func(in Input) string { return in.Tenant })
	}
	job, err := jobs.Define(name, func(in Input) string { return passKey(name, tenant.mode, in.Tenant) }, jt, b.pass, cfg.jobOpts...)
	if err != nil {
		return nil, err
	}
	b.Job = job
	b.decl = Declaration{Kind: Kind, Name: name, Queue: job.Config().Queue, Batch: cfg.batch, Rate: cfg.rate,
		Tenant: tenant.mode, Version: cfg.version, Requires: cfg.requires, Environments: cfg.environments,
		HasCount: cfg.count != nil}
	if d, ok := source.(Describer); ok {
		b.decl.Source = d.Describe()
	}
	b.decl.Checksum = b.decl.Sum()
	register(b)
	return b, nil
}

// MustDefine is Define for package-level declarations: it panics on a refused definition, so a
// bad declaration fails at start-up, not on the fourth attempt.
func MustDefine[Row any](name string, tenant Tenant, source Source[Row], handle func(ctx context.Context, b Batch[Row]) error, opts ...Option) *Backfill[Row] {
	b, err := Define(name, tenant, source, handle, opts...)
	if err != nil {
		panic(err)
	}
	return b
}

// Declaration returns the backfill's declaration.
func (b *Backfill[Row]) Declaration() Declaration { return b.decl }

// Count runs the declared count (for a dry run from app code) with no tenant; ok is false when
// none is declared. A PerTenant backfill counts one tenant's rows with CountTenant.
func (b *Backfill[Row]) Count(ctx context.Context) (n int64, ok bool, err error) {
	return b.CountTenant(ctx, "")
}

// CountTenant runs the declared count for one tenant's pass (CountRequest.Tenant); ok is false
// when none is declared.
func (b *Backfill[Row]) CountTenant(ctx context.Context, tenant string) (n int64, ok bool, err error) {
	if b.cfg.count == nil {
		return 0, false, nil
	}
	n, err = b.cfg.count(ctx, CountRequest{Tenant: tenant})
	if err == nil && n < 0 {
		err = jobs.Errorf(jobs.CodeInvariant, "backfill %q: count answered %d", b.decl.Name, n)
	}
	return n, true, err
}

// pass is the job body: one pass over the source.
func (b *Backfill[Row]) pass(c *jobs.Ctx, in Input) (Result, error) {
	d := b.decl
	res := Result{Name: d.Name}
	env := RuntimeFrom(c)
	// The environment is enforced here, where the work is: an enqueue from app code reaches no
	// CLI, so a check only there would be a convention, not a rail.
	migration := MigrationUnknown
	if d.Requires != "" && b.cfg.migrations != nil {
		migration = MigrationState(c, b.cfg.migrations, d.Requires)
	}
	if v := Gate(GateInput{Declaration: d, Environment: env.Environment, Migration: migration}); !v.Run() {
		return res, v.Err
	}
	if d.Tenant == "input" && in.Tenant == "" {
		return res, jobs.Errorf(jobs.CodeJobTenantRequired, "backfill %q sweeps one tenant per pass and the input names none", d.Name)
	}
	tenant := in.Tenant
	if d.Tenant == "none" {
		tenant = ""
	}
	ldg, err := openLedger(c, d, tenant, in.Force, env.AppVersion)
	if err != nil {
		return res, err
	}
	defer ldg.settle() // a report in flight never outlives the pass (finish settles it first)
	if ldg.completed != nil {
		if v := Gate(GateInput{Declaration: d, Environment: env.Environment, Completed: ldg.completed}); !v.Run() {
			// The pass is the no-op, not the enqueue: the run completes and says so.
			res.Skipped, res.PreviousRunID = true, ldg.completed.RunID
			return res, nil
		}
	}
	res.Warnings = append(res.Warnings, ldg.warnings...)
	if b.cfg.count != nil && ldg.l != nil && !ldg.adopted {
		// The count at the start is for people (rows left, an ETA); the check that the pass
		// converged is the count after the last page.
		if n, err := b.cfg.count(c, CountRequest{Tenant: tenant}); err == nil && n >= 0 {
			ldg.total(c, n)
		}
	}

	clk := clock.FromContext(c)
	interval := time.Duration(float64(time.Second) / b.cfg.rate)
	var lastLive time.Time   // when this execution's previous live page ended
	var lastReport time.Time // when this execution last reported progress
	var cp Checkpoint
	ahead := &readAhead[Row]{}
	defer ahead.close() // a page handled ahead never outlives the pass
	for i := 0; !cp.Done; i++ {
		live := false
		next, err := jobs.Step(c, fmt.Sprintf("batch:%d", i), func(ctx context.Context) (Checkpoint, error) {
			live = true
			req := PageRequest{After: cp.Cursor, Limit: d.Batch, Tenant: tenant}
			if ahead.handles(i, req) {
				// The page was read and handled while the previous checkpoint committed
				// (OverlapCheckpoints): its pause was spent before its read, there.
				rows, cursor, began, err := ahead.takeHandled(ctx)
				if err != nil {
					return Checkpoint{}, err
				}
				if len(rows) == 0 {
					return Checkpoint{Cursor: cp.Cursor, Zones: cp.Zones, Rows: cp.Rows, Done: true}, nil
				}
				return b.after(c, ahead, i, cp, rows, cursor, began, interval, tenant)
			}
			if !lastLive.IsZero() {
				// The pause is spent inside the step: a replayed page costs no pause.
				if err := pause(ctx, clk, interval-clk.Now().Sub(lastLive)); err != nil {
					return Checkpoint{}, err
				}
			}
			started := clk.Now()
			rows, cursor, err := ahead.take(ctx, i, req, b.source)
			if err != nil {
				return Checkpoint{}, err
			}
			if err := b.checkPage(rows); err != nil {
				return Checkpoint{}, err
			}
			if len(rows) == 0 {
				return Checkpoint{Cursor: cp.Cursor, Zones: cp.Zones, Rows: cp.Rows, Done: true}, nil
			}
			if cursor, err = b.checkCursor(req.After, len(rows), cursor); err != nil {
				return Checkpoint{}, err
			}
			if err := b.handle(ctx, Batch[Row]{Rows: rows, Index: i, Tenant: tenant}); err != nil {
				return Checkpoint{}, err
			}
			return b.after(c, ahead, i, cp, rows, cursor, started, interval, tenant)
		})
		if err != nil {
			ahead.close()
			ldg.finish(c, StatusFailed, cp, int64(i), err.Error())
			return res, err
		}
		cp = next
		// The step's result is its record's, decoded (live as replayed): normalised, and its
		// times back in their zones, the cursor is the one the page recorded, with the same
		// types (normalCursor), equal to the one a page read ahead was asked after.
		cp.Cursor = withZones(normalDecoded(cp.Cursor), cp.Zones)
		res.Batches, res.Rows = int64(i+1), cp.Rows
		if live {
			lastLive = clk.Now()
			// Progress is a report for people: after the first page, then at most once per
			// ProgressEvery, so a fast sweep does not pay a ledger write for every page.
			if lastReport.IsZero() || lastLive.Sub(lastReport) >= ProgressEvery {
				if ldg.progress(c, cp, res.Batches) {
					lastReport = lastLive
				}
			}
		}
	}
	if b.cfg.count != nil {
		n, err := b.cfg.count(c, CountRequest{Tenant: tenant})
		switch {
		case err != nil:
			ldg.finish(c, StatusFailed, cp, res.Batches, err.Error())
			return res, err
		case n < 0:
			err := jobs.Errorf(jobs.CodeInvariant, "backfill %q: count answered %d", d.Name, n)
			ldg.finish(c, StatusFailed, cp, res.Batches, err.Error())
			return res, err
		case n > 0:
			scope := ""
			if tenant != "" {
				scope = fmt.Sprintf(" of tenant %q", tenant)
			}
			err := jobs.Errorf(jobs.CodeBackfillStalled, "backfill %q: the source ran out after %d rows%s and the count still matches %d", d.Name, cp.Rows, scope, n)
			ldg.finish(c, StatusFailed, cp, res.Batches, err.Error())
			return res, err
		}
	}
	ldg.finish(c, StatusCompleted, cp, res.Batches, "")
	res.Warnings = append(res.Warnings, ldg.warnings[len(res.Warnings):]...)
	return res, nil
}

// checkPage refuses a page longer than the batch: the source broke its contract.
func (b *Backfill[Row]) checkPage(rows []Row) error {
	if len(rows) > b.decl.Batch {
		return jobs.Errorf(jobs.CodeInvariant, "backfill %q: the source returned %d rows for a page of %d", b.decl.Name, len(rows), b.decl.Batch)
	}
	return nil
}

// checkCursor normalises the cursor a page of n rows (n ≥ 1), asked for after `after`, returned
// (normalCursor), and refuses a full page whose cursor is missing or has not moved. Either would
// read the same page again for ever: with no cursor the next page is the first one, and with the
// cursor it was asked after it is this one. Both are the source's bug, so they fail with
// X_INVARIANT, terminal, before the page is handled (a retry would loop the same way). A short
// page ends the pass, so its cursor is recorded as it is. Rows out of key order cannot be seen
// here: the pass cannot compare keys in the source's order (Source).
func (b *Backfill[Row]) checkCursor(after Cursor, n int, next Cursor) (Cursor, error) {
	next, err := normalCursor(next)
	if err != nil {
		return nil, jobs.Wrap(jobs.CodeEncoding, err, "backfill %q: the source's cursor cannot be recorded in a checkpoint (its values must be plain data)", b.decl.Name)
	}
	if n < b.decl.Batch {
		return next, nil
	}
	switch {
	case next == nil:
		return nil, jobs.Errorf(jobs.CodeInvariant, "backfill %q: the source returned a full page of %d rows and no cursor, so the next page would be the first one again: return the key of the page's last row", b.decl.Name, n)
	case after != nil && sameCursor(next, after):
		return nil, jobs.Errorf(jobs.CodeInvariant, "backfill %q: the source returned a full page whose cursor %s is the cursor it was asked after, so the next page would be this one again: return the key of the page's last row and page after it", b.decl.Name, cursorText(next))
	}
	return next, nil
}

// after is the end of page i, whose rows were handled (started is when its read began): its
// checkpoint, and the next page's read (and, with OverlapCheckpoints, its handler) started to run
// while this checkpoint commits, when the sweep is bound by its statements rather than its rate.
func (b *Backfill[Row]) after(c *jobs.Ctx, ahead *readAhead[Row], i int, cp Checkpoint, rows []Row, cursor Cursor, started time.Time, interval time.Duration, tenant string) (Checkpoint, error) {
	clk := clock.FromContext(c)
	done := len(rows) < b.decl.Batch
	if !done && interval < clk.Now().Sub(started) {
		// The next page would not wait for the rate: read it while this page's checkpoint
		// commits. The read starts after this page's handler returned, so it sees its writes.
		req := PageRequest{After: cursor, Limit: b.decl.Batch, Tenant: tenant}
		if b.cfg.overlap {
			ahead.startHandled(c, i+1, req, b.source, clk.Now().Add(interval), func(ctx context.Context, rows []Row, next Cursor) (Cursor, error) {
				if err := b.checkPage(rows); err != nil {
					return nil, err
				}
				next, err := b.checkCursor(req.After, len(rows), next)
				if err != nil {
					return nil, err
				}
				return next, b.handle(ctx, Batch[Row]{Rows: rows, Index: i + 1, Tenant: tenant})
			})
		} else {
			ahead.start(c, i+1, req, b.source)
		}
	}
	return Checkpoint{Cursor: cursor, Zones: zonesOf(cursor), Rows: cp.Rows + int64(len(rows)), Done: done}, nil
}

// readAhead is the next page, read (and with OverlapCheckpoints handled) while the current
// page's checkpoint commits. It is used only by the next live page of the same execution, and
// only for the cursor it was read after; a replayed page, or a plain read that failed, reads
// again.
type readAhead[Row any] struct {
	// mu: a step under a StepTimeout runs on a goroutine of its own, which may still be taking
	// the page when its step has given up on it and the pass stops the read-ahead.
	mu    sync.Mutex
	index int
	after Cursor
	ch    chan pageRead[Row]
	// cancel ends the page's handler, which runs after its read (OverlapCheckpoints); nil for a
	// plain read-ahead.
	cancel context.CancelCauseFunc
	// closed: the pass is ending; nothing more is handled ahead (a step's goroutine that outlived
	// its StepTimeout may still reach startHandled).
	closed bool
}

type pageRead[Row any] struct {
	rows []Row
	next Cursor
	err  error
	// began is when the page's pause ended and its read started (a handled page).
	began time.Time
}

// errPassEnded cancels a page handled ahead whose pass ended before taking it.
var errPassEnded = errors.New("backfill: the pass ended before this page's turn")

// startHandled reads page index once notBefore passed and hands it to handle (which checks the
// page and answers its normalised cursor), beside the current page's checkpoint. Only the step of
// that very page takes the outcome (takeHandled); anything else stops it first.
func (a *readAhead[Row]) startHandled(c *jobs.Ctx, index int, req PageRequest, src Source[Row], notBefore time.Time, handle func(context.Context, []Row, Cursor) (Cursor, error)) {
	a.stop()
	ctx, cancel := context.WithCancelCause(c)
	ch := make(chan pageRead[Row], 1)
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		cancel(errPassEnded)
		return
	}
	a.index, a.after, a.ch, a.cancel = index, req.After, ch, cancel
	a.mu.Unlock()
	clk := clock.FromContext(c)
	go func() {
		// The rate's pause comes before the page's statements, as in a step; it runs from the
		// end of the previous page's handler.
		if err := pause(ctx, clk, notBefore.Sub(clk.Now())); err != nil {
			ch <- pageRead[Row]{err: err}
			return
		}
		began := clk.Now()
		rows, next, err := src.Page(ctx, req)
		if err == nil && len(rows) > 0 {
			next, err = handle(ctx, rows, next)
		}
		ch <- pageRead[Row]{rows: rows, next: next, err: err, began: began}
	}()
}

// handles reports whether page index, asked for with req, was started ahead with its handler.
func (a *readAhead[Row]) handles(index int, req PageRequest) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ch != nil && a.cancel != nil && a.index == index && reflect.DeepEqual(a.after, req.After)
}

// takeHandled waits for the page handled ahead. A step that ends first (its timeout, the run's
// cancel) stops the handler and waits for it, so no handler outlives its step.
func (a *readAhead[Row]) takeHandled(ctx context.Context) ([]Row, Cursor, time.Time, error) {
	a.mu.Lock()
	ch, cancel := a.ch, a.cancel
	a.ch, a.cancel = nil, nil
	a.mu.Unlock()
	if ch == nil {
		return nil, nil, time.Time{}, errPassEnded
	}
	select {
	case r := <-ch:
		cancel(nil)
		return r.rows, r.next, r.began, r.err
	case <-ctx.Done():
		cancel(context.Cause(ctx))
		<-ch
		return nil, nil, time.Time{}, context.Cause(ctx)
	}
}

// stop ends a page handled ahead that nobody will take, and waits for its handler to return.
// A plain read-ahead is left to finish on its own: it writes nothing.
func (a *readAhead[Row]) stop() {
	a.mu.Lock()
	ch, cancel := a.ch, a.cancel
	a.ch, a.cancel = nil, nil
	a.mu.Unlock()
	if ch != nil && cancel != nil {
		cancel(errPassEnded)
		<-ch
	}
}

// close stops what was started ahead and refuses anything more: the pass is ending.
func (a *readAhead[Row]) close() {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	a.stop()
}

func (a *readAhead[Row]) start(ctx context.Context, index int, req PageRequest, src Source[Row]) {
	a.stop()
	ch := make(chan pageRead[Row], 1)
	a.mu.Lock()
	a.index, a.after, a.ch = index, req.After, ch
	a.mu.Unlock()
	go func() {
		rows, next, err := src.Page(ctx, req)
		ch <- pageRead[Row]{rows: rows, next: next, err: err}
	}()
}

func (a *readAhead[Row]) take(ctx context.Context, index int, req PageRequest, src Source[Row]) ([]Row, Cursor, error) {
	a.mu.Lock()
	handled := a.cancel != nil
	a.mu.Unlock()
	if handled {
		a.stop() // handled ahead for another page or cursor: never the case (see handles)
	}
	a.mu.Lock()
	ch, at, after := a.ch, a.index, a.after
	a.ch = nil
	a.mu.Unlock()
	if ch != nil && at == index && reflect.DeepEqual(after, req.After) {
		select {
		case r := <-ch:
			if r.err == nil {
				return r.rows, r.next, nil
			}
		case <-ctx.Done():
			return nil, nil, context.Cause(ctx)
		}
	}
	return src.Page(ctx, req)
}

// pause waits d on clk, or until ctx ends: a cancelled run's pause ends at once with X_ABORTED
// (or the context's own jobs error: a step timeout), not in a timer nobody waits for.
func pause(ctx context.Context, clk clock.Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		if e, ok := context.Cause(ctx).(*jobs.Error); ok {
			return e
		}
		return jobs.Wrap(jobs.CodeAborted, context.Cause(ctx), "backfill pause cancelled")
	}
}

// cursorText is the ledger's cursor: the cursor as JSON text, for people, cut to
// MaxCursorText bytes. A source whose key is a long text (a URL, an object-store path) returns a
// cursor longer than the ledger keeps, and the row is a report: a cut cursor still says where
// the pass stands, where a refused one left the whole report (the rows and batches too) unsaid.
func cursorText(c Cursor) string {
	if c == nil {
		return ""
	}
	b, err := json.Marshal(c)
	if err != nil {
		return CutCursorText(fmt.Sprint([]any(c)))
	}
	return CutCursorText(string(b))
}

// MaxCursorText is the most bytes of a ledger row's cursor text, the cut's "…" included.
const MaxCursorText = 1000

// CutCursorText cuts a ledger cursor's text to MaxCursorText bytes on a rune boundary, ending in
// "…" when it cut (and makes it storable: invalid UTF-8 and NUL are replaced). The pass cuts its
// cursor with it, and the engine cuts what a report sends again, so a report from any worker is
// kept rather than refused.
func CutCursorText(s string) string {
	return freetext.Cut(s, MaxCursorText-len("…"))
}

// ledger is a pass's view of its ledger row. Every write is a report: one that fails is logged
// and the pass goes on (the row is never where it resumes from).
type ledger struct {
	l         *frontend.ClaimedLedger // nil: no ledger, no bookkeeping
	name      string
	completed *Progress
	adopted   bool
	warnings  []string
	// inflight is closed when the progress report sent last has landed (or failed).
	inflight chan struct{}
}

// openLedger opens the pass's row. A ledger that is absent, or that fails, is no reason not to
// sweep (no bookkeeping, never a refusal); a claim this worker no longer holds is. The engine
// keeps the row under the run's tenant (tenant, for a per-tenant pass), and only a completed pass
// of the same (name, tenant) makes this one a no-op.
func openLedger(c *jobs.Ctx, d Declaration, tenant string, force bool, appVersion string) (*ledger, error) {
	l, ok := frontend.LedgerFrom(c)
	out := &ledger{name: d.Name}
	if !ok {
		return out, nil
	}
	resp, err := retryLedger(c, func() (frontend.BackfillOpenResponse, error) {
		return l.Open(c, frontend.BackfillOpenRequest{Name: d.Name, Checksum: d.Checksum, AppVersion: appVersion, Force: force, Total: -1})
	})
	switch {
	case jobs.HasCode(err, jobs.CodeJobLeaseLost), jobs.HasCode(err, jobs.CodeAborted):
		return nil, err
	case jobs.HasCode(err, jobs.CodeBackfillLive):
		// Another pass of this backfill (for this tenant) is live, enqueued under another key (a
		// schedule's, a manual trigger's): two passes would sweep the same rows at once. Terminal,
		// and not a reason to sweep without a row like the other refusals: it is the sweep that
		// is refused.
		return nil, err
	case err != nil && jobs.ClassOf(jobs.CodeOf(err)) != jobs.Terminal:
		// The ledger is there but failing: this attempt fails and is retried, rather than
		// sweeping without a row and leaving the name pending after it completed.
		return nil, err
	case err != nil:
		out.warn(c, "the ledger row could not be opened, so this pass keeps no ledger: %v", err)
		return out, nil
	case !resp.Ledger:
		return out, nil // the engine keeps no ledger: the pass runs anyway
	}
	out.l = l
	out.adopted = resp.Adopted
	if resp.Completed != nil {
		p := NewProgress(*resp.Completed, "")
		p.Tenant = tenant
		out.completed = &p
		return out, nil
	}
	if resp.PreviousChecksum != "" {
		out.warn(c, "the definition's checksum moved from %s to %s since the last pass", resp.PreviousChecksum, d.Checksum)
	}
	return out, nil
}

func (l *ledger) total(c *jobs.Ctx, n int64) {
	if l.l == nil {
		return
	}
	if _, err := l.l.Open(c, frontend.BackfillOpenRequest{Name: l.name, Force: true, Total: n}); err != nil {
		slog.Default().Warn("jobs.backfill.ledger", "backfill", l.name, "err", err)
	}
}

// progress reports where the pass stands, off the pages' critical path: the report is sent
// beside the next page, never between a checkpoint and the next handler, because it is a report
// for people and the checkpoint already made the page durable. One report is in flight at a
// time; while one is, progress answers false and the caller tries again after the next page.
// The ledger never moves a row backwards, and finish waits for the report in flight, so a late
// report cannot overwrite the end.
func (l *ledger) progress(c *jobs.Ctx, cp Checkpoint, batches int64) bool {
	if l.l == nil {
		return true
	}
	if l.inflight != nil {
		select {
		case <-l.inflight:
		default:
			return false
		}
	}
	done := make(chan struct{})
	l.inflight = done
	req := frontend.BackfillReportRequest{Rows: cp.Rows, Batches: batches, Cursor: cursorText(cp.Cursor)}
	go func() {
		defer close(done)
		// Not under the run's context: a run cancelled while its report is on the way would end
		// the call before it is sent, and the engine admits exactly that late report (the page
		// is in the history), so the ledger would lose the last pages' rows. Bounded instead.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(c), progressTimeout)
		defer cancel()
		if err := l.l.Report(ctx, req); err != nil {
			slog.Default().Warn("jobs.backfill.ledger", "backfill", l.name, "err", err)
		}
	}()
	return true
}

// progressTimeout bounds a progress report, which outlives the run's context (progress).
const progressTimeout = 10 * time.Second

// settle waits for the progress report in flight, if any.
func (l *ledger) settle() {
	if l.inflight != nil {
		<-l.inflight
		l.inflight = nil
	}
}

func (l *ledger) finish(c *jobs.Ctx, status string, cp Checkpoint, batches int64, errText string) {
	if l.l == nil {
		return
	}
	l.settle()
	// Sent with the run's cancellation cut off: a cancelled run's pass still reports its end (the
	// engine takes a failed end from the run's last holder, and records it with the cancel's
	// reason), so its row is final when the cancel lands, not only once someone reads it.
	_, err := retryLedger(c, func() (struct{}, error) {
		return struct{}{}, l.l.Report(context.WithoutCancel(c), frontend.BackfillReportRequest{Rows: cp.Rows, Batches: batches,
			Cursor: cursorText(cp.Cursor), Status: status, Error: errText})
	})
	if err != nil && status == StatusCompleted {
		l.warn(c, "the ledger row could not be completed: %v", err)
	}
}

func (l *ledger) warn(c *jobs.Ctx, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	l.warnings = append(l.warnings, msg)
	slog.Default().Warn("jobs.backfill.warning", "backfill", l.name, "run", c.Run().RunID, "msg", msg)
}

// retryLedger retries a ledger call whose failure was transient, a few times.
func retryLedger[T any](c *jobs.Ctx, fn func() (T, error)) (T, error) {
	var v T
	var err error
	backoff := 20 * time.Millisecond
	for try := 1; try <= 4; try++ {
		if v, err = fn(); err == nil {
			return v, nil
		}
		switch jobs.CodeOf(err) {
		case jobs.CodeStoreUnavailable, jobs.CodeEngineUnreachable, jobs.CodeCommitUnknown, jobs.CodeInternal:
		default:
			return v, err
		}
		time.Sleep(backoff) // wall-clock: a network retry, not logic a test drives
		backoff *= 2
	}
	return v, err
}
