package outbox

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/internal/promreg"
)

// Relay defaults.
const (
	DefaultLease    = 30 * time.Second
	DefaultBatch    = 100
	DefaultInterval = 200 * time.Millisecond
)

// RelayConfig configures a Relay.
type RelayConfig struct {
	// Store holds the staged rows. Required.
	Store Store
	// Publisher enqueues a row's request on the engine: the in-process *engine.Engine or an
	// *api.Client. Required.
	Publisher jobs.Enqueuer
	// ID names this relay in the rows it claims. Defaults to a fresh unique id; two relays must
	// never share one.
	ID string
	// Lease is how long a claim holds its rows: the longest the rows of a relay that died
	// mid-batch wait before another relay takes them. 0 means DefaultLease (30s); a negative
	// lease is refused with X_INVARIANT.
	Lease time.Duration
	// Batch is the most rows one pass claims. 0 means DefaultBatch; negative is refused.
	Batch int
	// Interval is the wait between passes that found less than a full batch. 0 means
	// DefaultInterval; negative is refused.
	Interval time.Duration
	Clock    clock.Clock
	Logger   *slog.Logger
	// Registerer receives the relay's metrics (jobs_outbox_backlog,
	// jobs_outbox_oldest_staged_seconds, jobs_outbox_published_total, jobs_outbox_failed,
	// jobs_outbox_failed_total). Nil registers nothing. Relays may share one: the counters are
	// then the process's, and the gauges cover its running relays (see relayMetrics).
	Registerer prometheus.Registerer
}

// Relay publishes staged rows to the engine: claim a batch, publish each row in order, then mark
// the published ones. A publish that fails stops the batch (no later row overtakes it) and the
// rest of the batch is released at once, so a blip costs one interval, not a lease.
//
// A publish the engine refuses for good is not a blip: retrying it would stop every row behind it
// forever. A refusal whose code is Terminal (jobs.ClassOf: an input over the engine's
// MaxPayload, X_FLOW_KEY, X_JOB_UNDECLARED, ...) sets the row aside instead: it is marked failed
// in the store with the code, the message and the time, logged at error level as
// jobs.outbox.row-failed and counted, and the rest of the batch goes on. A failed row is never
// published again by itself; an operator lists it (Store.Failed) and requeues it, once its cause
// is fixed, or drops it. The terminal codes that say the relay's own wiring is wrong rather than
// the row (X_UNAUTHORIZED, X_FORBIDDEN, X_ROUTE_NOT_FOUND, X_METHOD_NOT_ALLOWED,
// X_DRIVER_UNAVAILABLE, X_STORE_LOCKED, X_INVARIANT) stop the batch like any other failure: set
// aside, every row would fail alike. So do X_JOB_UNDECLARED and X_QUEUE_UNDECLARED, which a
// rolling deploy ends; a row they hold that nothing will end (a misspelt job name) is moved out
// of the line by an operator with Store.SetAside, and the rows behind it go on.
type Relay struct {
	cfg     RelayConfig
	metrics *relayMetrics

	// afterPublish, set by tests, runs after row i was published; false ends the pass there as
	// if the process died: nothing is marked and nothing released.
	afterPublish func(i int) bool

	mu      sync.Mutex
	stop    chan struct{}
	done    chan struct{}
	running bool
}

// NewRelay returns a relay; Start runs it.
func NewRelay(cfg RelayConfig) (*Relay, error) {
	switch {
	case cfg.Store == nil:
		return nil, jobs.Errorf(jobs.CodeInvariant, "outbox relay: no store configured")
	case cfg.Publisher == nil:
		return nil, jobs.Errorf(jobs.CodeInvariant, "outbox relay: no publisher configured")
	case cfg.Lease < 0:
		return nil, jobs.Errorf(jobs.CodeInvariant, "outbox relay: the claim lease must be positive, got %s", cfg.Lease)
	case cfg.Batch < 0:
		return nil, jobs.Errorf(jobs.CodeInvariant, "outbox relay: the batch must be positive, got %d", cfg.Batch)
	case cfg.Interval < 0:
		return nil, jobs.Errorf(jobs.CodeInvariant, "outbox relay: the interval must be positive, got %s", cfg.Interval)
	}
	if cfg.Lease == 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Batch == 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ID == "" {
		cfg.ID = "relay-" + newID(time.Now())
	} else if err := jobs.ValidIdentifier("relay id", cfg.ID); err != nil {
		return nil, err
	}
	m, err := newRelayMetrics(cfg.Registerer, cfg.Store)
	if err != nil {
		return nil, err
	}
	return &Relay{cfg: cfg, metrics: m}, nil
}

// ID is the relay's claimant id.
func (r *Relay) ID() string { return r.cfg.ID }

// Start runs passes until Stop. A pass that fails is logged as jobs.outbox.tick-failed and the
// loop carries on after the interval: rows stay staged, never lost, while the store or the
// engine is away. After a Stop whose ctx ran out before the pass in flight ended, Start first
// waits, within ctx, for that loop to exit: two loops never run under one relay id, where they
// would publish the same rows side by side under one claim.
func (r *Relay) Start(ctx context.Context) error {
	r.mu.Lock()
	if r.running {
		r.mu.Unlock()
		return nil
	}
	prev := r.done
	r.mu.Unlock()
	if err := joined(ctx, prev); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running {
		return nil // a concurrent Start got there first
	}
	r.running = true
	r.stop, r.done = make(chan struct{}), make(chan struct{})
	go r.loop(r.stop, r.done)
	return nil
}

// Stop ends the loop and JOINS the pass in flight: it returns once that pass has published and
// marked (or released) its rows, so the caller may close the database after it. ctx bounds the
// wait; a Stop that ran out of time leaves the pass to finish, and a later Stop joins it again
// (it returns nil only once the loop has exited).
func (r *Relay) Stop(ctx context.Context) error {
	r.mu.Lock()
	if r.running {
		r.running = false
		close(r.stop)
	}
	done := r.done
	r.mu.Unlock()
	r.metrics.quiet() // a relay that ran passes without Start too; a pass in flight's loop quiets again
	return joined(ctx, done)
}

// joined waits, within ctx, for a loop's done to close; nil when no loop was ever started.
func joined(ctx context.Context, done <-chan struct{}) error {
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *Relay) loop(stop, done chan struct{}) {
	defer close(done)
	// Before done closes: once Stop returns, the stopped relay's last reading is not served
	// (it still answers Backlog).
	defer r.metrics.quiet()
	// A pass runs to its end once begun (Stop joins it rather than cutting it between a
	// publish and its mark), so its context is not the stop signal.
	ctx := context.Background()
	for {
		select {
		case <-stop:
			return
		default:
		}
		_, claimed, err := r.pass(ctx)
		if err != nil {
			r.cfg.Logger.Warn("jobs.outbox.tick-failed", "relay", r.cfg.ID, "err", err)
		}
		if err == nil && claimed == r.cfg.Batch {
			continue // a full batch: there is probably more
		}
		t := r.cfg.Clock.NewTimer(r.cfg.Interval)
		select {
		case <-stop:
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// Pass runs one claim-publish-mark round and returns how many rows it published. Start's loop
// calls it; a test or a one-shot command may call it directly. A row set aside as failed is not
// counted, and is no error of the pass.
func (r *Relay) Pass(ctx context.Context) (int, error) {
	n, _, err := r.pass(ctx)
	return n, err
}

// pass is Pass, also returning how many rows it claimed.
func (r *Relay) pass(ctx context.Context) (int, int, error) {
	now := r.cfg.Clock.Now()
	rows, err := r.cfg.Store.Claim(ctx, r.cfg.ID, now, r.cfg.Lease, r.cfg.Batch)
	if err != nil {
		return 0, 0, err
	}
	var published []string
	var pubErr error
	for i, row := range rows {
		err := r.publish(ctx, row)
		if err != nil && setsAside(err) {
			if err = r.setAside(ctx, row, err); err == nil {
				continue // the rows behind it go on
			}
		}
		if err != nil {
			// Stop here: the rows behind this one must not overtake it. Hand them back at
			// once, so the next pass (ours or another relay's) retries from this row.
			pubErr = jobs.Wrap(jobs.CodeOf(err), err, "outbox relay %s: publish row %s (%s)%s", r.cfg.ID, row.ID, row.Request.Job, heldHint(err))
			rest := make([]string, 0, len(rows)-i)
			for _, x := range rows[i:] {
				rest = append(rest, x.ID)
			}
			if _, err := r.cfg.Store.Release(ctx, r.cfg.ID, rest); err != nil {
				r.cfg.Logger.Warn("jobs.outbox.release-failed", "relay", r.cfg.ID, "rows", len(rest), "err", err)
			}
			break
		}
		published = append(published, row.ID)
		if r.afterPublish != nil && !r.afterPublish(i) {
			return len(published), len(rows), nil
		}
	}
	if len(published) > 0 {
		// Publish, THEN mark: a crash between the two republishes these rows, and the engine
		// dedupes them by the row id, even if their runs already finished.
		marked, err := r.cfg.Store.MarkPublished(ctx, r.cfg.ID, published, r.cfg.Clock.Now())
		if err != nil {
			return len(published), len(rows), err
		}
		// Only the rows the mark retired count: a row whose claim lapsed meanwhile is another
		// relay's now, and it counts the row when it publishes and marks it (the engine hands
		// it the run this publish created). Counting both would count the row twice.
		r.metrics.published.Add(float64(marked))
	}
	r.observe(ctx, len(rows) < r.cfg.Batch)
	return len(published), len(rows), pubErr
}

// publish enqueues row on the engine under its dedupe id. A row the claim could not read back
// carries its error instead (X_ENCODING): it is refused here, never sent.
func (r *Relay) publish(ctx context.Context, row Row) error {
	if row.ErrorCode != "" {
		return jobs.Errorf(row.ErrorCode, "%s", row.ErrorMessage)
	}
	req := row.Request
	req.DedupeID = DedupeID(row.ID)
	// The delay counts from staging, when the caller enqueued, as a direct enqueue's counts from
	// its call: the engine counts it from the publish, so it is shortened by the time the row
	// waited in line (a relay down, a long backlog), down to none. Sent whole, a row published
	// 50 minutes late with an hour's delay ran at staging + 1h50m. A relay clock behind the
	// stager's never lengthens it.
	if waited := r.cfg.Clock.Now().Sub(row.StagedAt); req.Delay > 0 && !row.StagedAt.IsZero() && waited > 0 {
		req.Delay = max(req.Delay-waited, 0)
	}
	_, err := r.cfg.Publisher.Enqueue(ctx, req)
	return err
}

// wiringCodes are the terminal codes that name what is wrong with the relay's own wiring (its
// credential, the client's address, the engine's store), a bug, or the fleet's state, not with
// the row: every row would be refused alike, or the refusal ends by itself, so they stop the
// batch and are retried, as a transient failure is. A job or queue no worker declares yet is
// the fleet's state: a producer deployed before the workers that host its new job, which a
// rolling deploy brings; setting its rows aside would make every such deploy an operator's
// requeue. The other side of that choice is a row naming a job no deploy will ever declare: it
// holds the line until an operator sets it aside (Store.SetAside), which the pass's error says.
var wiringCodes = map[jobs.Code]bool{
	jobs.CodeJobUndeclared:     true,
	jobs.CodeQueueUndeclared:   true,
	jobs.CodeUnauthorized:      true,
	jobs.CodeForbidden:         true,
	jobs.CodeRouteNotFound:     true,
	jobs.CodeMethodNotAllowed:  true,
	jobs.CodeDriverUnavailable: true,
	jobs.CodeStoreLocked:       true,
	jobs.CodeInvariant:         true,
}

// heldHint tells the operator reading a pass's error how a row held for an undeclared job or
// queue ends: a worker declaring it, or, when none ever will, setting the row aside. A row the
// relay's credential may not publish (X_FORBIDDEN: a credential scoped to one tenant, and a row
// of another) holds the line too, until the credential is fixed or the row set aside.
func heldHint(err error) string {
	switch jobs.CodeOf(err) {
	case jobs.CodeJobUndeclared, jobs.CodeQueueUndeclared:
		return ", held in place until a worker declares it; if none ever will, set the row aside (Store.SetAside)"
	case jobs.CodeForbidden:
		return ", held in place: the relay's credential may not enqueue it (a credential scoped to one tenant publishes only that tenant's rows); give the relay an unscoped operator credential, or set the row aside (Store.SetAside)"
	}
	return ""
}

// setsAside reports whether a publish's refusal is the engine's last word on the row: a Terminal
// code that is not about the relay's wiring. Retryable, retry-after and unclassified codes (a
// plain error has none) are transient: X_STORE_UNAVAILABLE, X_ENGINE_UNREACHABLE, X_DRAINING,
// X_COMMIT_UNKNOWN, a cancelled context.
func setsAside(err error) bool {
	c := jobs.CodeOf(err)
	return c != "" && jobs.ClassOf(c) == jobs.Terminal && !wiringCodes[c]
}

// maxErrorMessage bounds the refusal's message kept on a failed row.
const maxErrorMessage = 2048

// boundMessage cuts msg to maxErrorMessage bytes, on a rune boundary.
func boundMessage(msg string) string {
	if len(msg) > maxErrorMessage {
		msg = strings.ToValidUTF8(msg[:maxErrorMessage], "") + "…"
	}
	return msg
}

// checkSetAside refuses an operator's SetAside that names no code: a failed row always says why.
func checkSetAside(code jobs.Code) error {
	if code == "" {
		return jobs.Errorf(jobs.CodeBadRequest, "outbox set aside: name the code the rows are set aside with (the refusal the relay logged, e.g. %s)", jobs.CodeJobUndeclared)
	}
	return nil
}

// setAside marks row failed with the refusal, logs and counts it. It returns nil once the row is
// set aside, else why not (the store failed, or the row's claim lapsed to another relay, which
// now decides): then the batch stops there as after a transient failure.
func (r *Relay) setAside(ctx context.Context, row Row, refusal error) error {
	code := jobs.CodeOf(refusal)
	msg := refusal.Error()
	var je *jobs.Error
	if errors.As(refusal, &je) && je.Message != "" {
		msg = je.Message
	}
	msg = boundMessage(msg)
	held, err := r.cfg.Store.MarkFailed(ctx, r.cfg.ID, row.ID, code, msg, r.cfg.Clock.Now())
	if err != nil {
		return jobs.Wrap(jobs.CodeOf(err), err, "set aside (refused with %s: %s)", code, msg)
	}
	if !held {
		return jobs.Wrap(code, refusal, "not set aside: the row's claim lapsed and another relay holds it")
	}
	r.cfg.Logger.Error("jobs.outbox.row-failed", "relay", r.cfg.ID, "row", row.ID, "job", row.Request.Job,
		"code", code, "err", msg)
	r.metrics.failedTotal.Inc()
	return nil
}

// observe refreshes the backlog metrics: after a pass that drained the backlog (the loop waits
// next, so the count costs nothing that matters), and under load at most once a second.
func (r *Relay) observe(ctx context.Context, idle bool) {
	now := r.cfg.Clock.Now()
	if !r.metrics.due(now, idle) {
		return
	}
	n, oldest, err := r.cfg.Store.Backlog(ctx)
	if err != nil {
		return
	}
	r.metrics.backlog.Set(float64(n))
	age := 0.0
	if !oldest.IsZero() {
		age = max(now.Sub(oldest).Seconds(), 0)
	}
	r.metrics.oldest.Set(age)
	if _, failed, err := r.cfg.Store.Failed(ctx, 0); err == nil {
		r.metrics.failed.Set(float64(failed))
	}
	r.metrics.serving()
}

// relayMetrics are a relay's series. The counters are the process's: the relays on one registry
// (two outbox tables, or a relay built again after a Stop) count into the ones registered first.
// The gauges are this relay's last reading of its store (observe), served through a Merge the
// relays of a registry share: the backlog and failed rows summed over the distinct stores of the
// running relays, the oldest row's age the largest of theirs, and relays on one store read once.
// A relay serves them from its first reading until it stops: a stopped relay's last reading is
// not served as if current.
type relayMetrics struct {
	backlog     prometheus.Gauge
	oldest      prometheus.Gauge
	published   prometheus.Counter
	failed      prometheus.Gauge
	failedTotal prometheus.Counter

	// gauges serves the gauges of the registry's running relays (nil without a registry); mine
	// is this relay's member, under its store as key.
	gauges *promreg.Merge
	mine   prometheus.Collector
	store  Store

	mu   sync.Mutex
	last time.Time
}

// newRelayMetrics makes a relay's metrics and registers them on reg (none when nil), all or
// nothing: a registry that refuses one (another series under one of the names) is left as it
// was, and the refusal is X_INVARIANT.
func newRelayMetrics(reg prometheus.Registerer, st Store) (*relayMetrics, error) {
	m := &relayMetrics{
		backlog: prometheus.NewGauge(prometheus.GaugeOpts{Name: "jobs_outbox_backlog",
			Help: "Outbox rows staged and not yet published."}),
		oldest: prometheus.NewGauge(prometheus.GaugeOpts{Name: "jobs_outbox_oldest_staged_seconds",
			Help: "Age of the oldest unpublished outbox row; 0 when none."}),
		published: prometheus.NewCounter(prometheus.CounterOpts{Name: "jobs_outbox_published_total",
			Help: "Outbox rows this relay published and marked."}),
		failed: prometheus.NewGauge(prometheus.GaugeOpts{Name: "jobs_outbox_failed",
			Help: "Outbox rows set aside as failed (refused by the engine for good), waiting for an operator to requeue or drop them."}),
		failedTotal: prometheus.NewCounter(prometheus.CounterOpts{Name: "jobs_outbox_failed_total",
			Help: "Outbox rows this relay set aside as failed: the engine refused their publish with a terminal code."}),
		store: st,
	}
	m.mine = promreg.All(m.backlog, m.oldest, m.failed)
	if reg == nil {
		return m, nil
	}
	gauges := promreg.NewMerge(nil, m.mine, map[*prometheus.Desc]promreg.Rule{m.oldest.Desc(): promreg.Max})
	g := promreg.New(reg)
	promreg.RegisterMerge(g, &gauges)
	promreg.Register(g, &m.published)
	promreg.Register(g, &m.failedTotal)
	if err := g.Err(); err != nil {
		return nil, jobs.Wrap(jobs.CodeInvariant, err, "outbox relay: register metrics")
	}
	m.gauges = gauges
	return m, nil
}

// serving makes this relay's gauges served, once it has read its store.
func (m *relayMetrics) serving() {
	if m.gauges != nil {
		m.gauges.Join(m.store, m.mine)
	}
}

// quiet stops serving this relay's gauges: it stopped.
func (m *relayMetrics) quiet() {
	if m.gauges != nil {
		m.gauges.Leave(m.mine)
	}
}

func (m *relayMetrics) due(now time.Time, idle bool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !idle && !m.last.IsZero() && now.Sub(m.last) < time.Second {
		return false
	}
	m.last = now
	return true
}

// Backlog returns the last observed backlog metrics: rows in line (failed rows are not) and the
// oldest one's age in seconds (for tests and health checks).
func (r *Relay) Backlog() (rows, oldestSeconds float64) {
	return readGauge(r.metrics.backlog), readGauge(r.metrics.oldest)
}

// FailedRows returns the last observed count of failed rows, set aside by any relay and not yet
// requeued or dropped (for tests and health checks).
func (r *Relay) FailedRows() float64 { return readGauge(r.metrics.failed) }
