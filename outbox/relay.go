package outbox

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/clock"
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
	// jobs_outbox_oldest_staged_seconds, jobs_outbox_published_total). Nil registers nothing.
	Registerer prometheus.Registerer
}

// Relay publishes staged rows to the engine: claim a batch, publish each row in order, then mark
// the published ones. A publish that fails stops the batch (no later row overtakes it) and the
// rest of the batch is released at once, so a blip costs one interval, not a lease.
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
	m, err := newRelayMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Relay{cfg: cfg, metrics: m}, nil
}

// ID is the relay's claimant id.
func (r *Relay) ID() string { return r.cfg.ID }

// Start runs passes until Stop. A pass that fails is logged as jobs.outbox.tick-failed and the
// loop carries on after the interval: rows stay staged, never lost, while the store or the
// engine is away.
func (r *Relay) Start(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running {
		return nil
	}
	r.running = true
	r.stop, r.done = make(chan struct{}), make(chan struct{})
	go r.loop(r.stop, r.done)
	return nil
}

// Stop ends the loop and JOINS the pass in flight: it returns once that pass has published and
// marked (or released) its rows, so the caller may close the database after it. ctx bounds the
// wait.
func (r *Relay) Stop(ctx context.Context) error {
	r.mu.Lock()
	if !r.running {
		r.mu.Unlock()
		return nil
	}
	r.running = false
	close(r.stop)
	done := r.done
	r.mu.Unlock()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *Relay) loop(stop, done chan struct{}) {
	defer close(done)
	// A pass runs to its end once begun (Stop joins it rather than cutting it between a
	// publish and its mark), so its context is not the stop signal.
	ctx := context.Background()
	for {
		select {
		case <-stop:
			return
		default:
		}
		n, err := r.Pass(ctx)
		if err != nil {
			r.cfg.Logger.Warn("jobs.outbox.tick-failed", "relay", r.cfg.ID, "err", err)
		}
		if err == nil && n == r.cfg.Batch {
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
// calls it; a test or a one-shot command may call it directly.
func (r *Relay) Pass(ctx context.Context) (int, error) {
	now := r.cfg.Clock.Now()
	rows, err := r.cfg.Store.Claim(ctx, r.cfg.ID, now, r.cfg.Lease, r.cfg.Batch)
	if err != nil {
		return 0, err
	}
	var published []string
	var pubErr error
	for i, row := range rows {
		req := row.Request
		req.DedupeID = DedupeID(row.ID)
		if _, err := r.cfg.Publisher.Enqueue(ctx, req); err != nil {
			// Stop here: the rows behind this one must not overtake it. Hand them back at
			// once, so the next pass (ours or another relay's) retries from this row.
			pubErr = jobs.Wrap(jobs.CodeOf(err), err, "outbox relay %s: publish row %s (%s)", r.cfg.ID, row.ID, row.Request.Job)
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
			return len(published), nil
		}
	}
	if len(published) > 0 {
		// Publish, THEN mark: a crash between the two republishes these rows, and the engine
		// dedupes them by the row id, even if their runs already finished.
		if _, err := r.cfg.Store.MarkPublished(ctx, r.cfg.ID, published, r.cfg.Clock.Now()); err != nil {
			return len(published), err
		}
		r.metrics.published.Add(float64(len(published)))
	}
	r.observe(ctx, len(rows) < r.cfg.Batch)
	return len(published), pubErr
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
}

type relayMetrics struct {
	backlog   prometheus.Gauge
	oldest    prometheus.Gauge
	published prometheus.Counter

	mu   sync.Mutex
	last time.Time
}

func newRelayMetrics(reg prometheus.Registerer) (*relayMetrics, error) {
	m := &relayMetrics{
		backlog: prometheus.NewGauge(prometheus.GaugeOpts{Name: "jobs_outbox_backlog",
			Help: "Outbox rows staged and not yet published."}),
		oldest: prometheus.NewGauge(prometheus.GaugeOpts{Name: "jobs_outbox_oldest_staged_seconds",
			Help: "Age of the oldest unpublished outbox row; 0 when none."}),
		published: prometheus.NewCounter(prometheus.CounterOpts{Name: "jobs_outbox_published_total",
			Help: "Outbox rows this relay published and marked."}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.backlog, m.oldest, m.published} {
			if err := reg.Register(c); err != nil {
				return m, jobs.Wrap(jobs.CodeInvariant, err, "outbox relay: register metrics")
			}
		}
	}
	return m, nil
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

// Backlog returns the last observed backlog metrics: unpublished rows and the oldest one's age in
// seconds (for tests and health checks).
func (r *Relay) Backlog() (rows, oldestSeconds float64) {
	return readGauge(r.metrics.backlog), readGauge(r.metrics.oldest)
}
