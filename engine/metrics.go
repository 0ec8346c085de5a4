package engine

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
)

// metrics are the engine's own series: what it recorded, and the histograms a person tunes the
// engine with. They are counted where the engine decides (a record committed, a lease reclaimed,
// a batch committed, a timer fired), so every engine replica counts its own share and a sum over
// replicas is the fleet's. The API server registers them (Collectors).
type metrics struct {
	jobs          *prometheus.CounterVec
	leasesLost    *prometheus.CounterVec
	runSeconds    *prometheus.HistogramVec
	stepSeconds   prometheus.Histogram
	batchSize     prometheus.Histogram
	batchSeconds  prometheus.Histogram
	timerLag      prometheus.Histogram
	commitUnknown prometheus.Counter
	handedBack    *prometheus.CounterVec // flow.go
	// queues tells the queues the manifest declares from every other name (queueLabels.label).
	queues queueLabels
	// handOvers are the landed records whose counting (with the rest of their post-commit work)
	// the committer does because their caller left mid-commit; a resend of one waits for it, so
	// its answer follows the count, as the first send's would have (record.go).
	handOvers handOvers
}

var engineSource = prometheus.Labels{"source": "engine"}

func newMetrics() *metrics {
	return &metrics{
		jobs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: jobs.MetricJobsTotal, Help: jobs.MetricJobsTotalHelp,
			ConstLabels: engineSource}, []string{"queue", "outcome"}),
		leasesLost: prometheus.NewCounterVec(prometheus.CounterOpts{Name: jobs.MetricLeasesLost, Help: jobs.MetricLeasesLostHelp,
			ConstLabels: engineSource}, []string{"queue"}),
		runSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "jobs_run_duration_seconds",
			Help: "Enqueue to finish of a run (completed, failed or cancelled), sleeps and waits included.",
			// From a fast job (10 ms) to a multi-day workflow.
			Buckets: prometheus.ExponentialBucketsRange(0.01, 7*24*3600, 20)}, []string{"queue", "outcome"}),
		stepSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "jobs_step_commit_seconds",
			Help:    "A worker's record of completed steps, from its arrival to its commit: the group commit's cost to a step.",
			Buckets: prometheus.ExponentialBucketsRange(0.0001, 5, 18)}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "jobs_commit_batch_size",
			Help:    "Records applied by one group commit: grows with load, 1 when idle.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 11)}),
		batchSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "jobs_commit_duration_seconds",
			Help:    "Time one group commit's store transaction took.",
			Buckets: prometheus.ExponentialBucketsRange(0.0001, 5, 18)}),
		timerLag: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "jobs_timer_lag_seconds",
			Help:    "How late the earliest due timer of a round fired (a sleep's wake-up, a retry, a wait's timeout).",
			Buckets: prometheus.ExponentialBucketsRange(0.001, 60, 16)}),
		commitUnknown: prometheus.NewCounter(prometheus.CounterOpts{Name: "jobs_commit_unknown_total",
			Help: "Group commits whose outcome had to be read back from the history (the connection failed mid-commit)."}),
		handedBack: newHandBackMetric(),
	}
}

// Collectors returns the engine's metrics, for a Prometheus registry.
func (e *Engine) Collectors() []prometheus.Collector {
	m := e.metrics
	return []prometheus.Collector{m.handedBack, m.jobs, m.leasesLost, m.runSeconds, m.stepSeconds, m.batchSize, m.batchSeconds,
		m.timerLag, m.commitUnknown, e.retention.deleted, e.retention.events, e.retention.seconds}
}

// recorded counts a committed record: its steps' commit latency (since arrived, wall clock) and,
// when it ended the claim with an outcome, that outcome and, for a finished run, its duration on
// the engine's clock.
func (m *metrics) recorded(ms store.Mutation, run store.Run, arrived time.Time) {
	steps := 0
	outcome := ""
	for _, ev := range ms.Events {
		switch ev.Kind {
		case history.KindStepCompleted:
			steps++
		case history.KindRunCompleted:
			outcome = "completed"
		case history.KindRunFailed:
			outcome = "failed"
		case history.KindAttemptFailed:
			outcome = "retried" // unless a RunFailed follows
		case history.KindRunBlocked:
			outcome = "blocked"
		}
	}
	if steps > 0 {
		d := time.Since(arrived).Seconds()
		for range steps {
			m.stepSeconds.Observe(d)
		}
	}
	if outcome == "" {
		return
	}
	q := m.queues.label(run.Queue)
	m.jobs.WithLabelValues(q, outcome).Inc()
	if run.State.Finished() {
		m.runSeconds.WithLabelValues(q, outcome).Observe(ms.Now.Sub(run.CreatedAt).Seconds())
	}
}

func (m *metrics) cancelled(run store.Run) {
	q := m.queues.label(run.Queue)
	m.jobs.WithLabelValues(q, "cancelled").Inc()
	m.runSeconds.WithLabelValues(q, "cancelled").Observe(run.FinishedAt.Sub(run.CreatedAt).Seconds())
}

func (m *metrics) expired(ws []store.Woken) {
	for _, w := range ws {
		m.leasesLost.WithLabelValues(m.queues.label(w.Queue)).Inc()
	}
}

// reclaimed counts the claims a worker's release took back from running bodies (not its sticky
// reservations) as leases lost, and returns how many there were.
func (m *metrics) reclaimed(ws []store.Woken) (n int) {
	for _, w := range ws {
		if w.Reclaimed {
			m.leasesLost.WithLabelValues(m.queues.label(w.Queue)).Inc()
			n++
		}
	}
	return n
}

// UndeclaredQueue is the queue label of the engine's series, and of the API's queue gauges, for
// every queue no worker's manifest declares. A queue label is a series of its own for the life of
// the process, and with AllowUndeclared a caller names any queue in an enqueue: labelled as
// named, a tenant's made-up queue names would each add series without bound. A declared queue is
// named by a worker's manifest (the queues it polls, the queue each of its jobs runs on), which
// only a worker's credential sends, so its labels stay as many as the deployment's queues; the
// runs of all other queues share this one label, as unknown hand-back reasons share "other".
const UndeclaredQueue = "undeclared"

// queueLabels maps a queue name to its label: the name when the engine's copy of the manifest
// (fleetView) declares it, UndeclaredQueue otherwise. The names are kept in a set built from that
// copy and swapped atomically, so a label of a declared queue, which is every run a worker
// claimed, costs a map read: no lock, no allocation, no store read. A name missing from the set
// asks fleetView (its cached copy, read from the store at most every fleetMaxAge) and builds the
// set again when the copy changed: a queue declared since the set was built is labelled by name
// from then on, and a made-up name (a run nobody could claim, cancelled, or a queue listed at a
// scrape) costs a look at the cached copy.
type queueLabels struct {
	// view is the engine's fleetView (bind); without it every name is UndeclaredQueue.
	view func(ctx context.Context, miss bool) (*fleet, error)
	set  atomic.Pointer[declaredQueues]
}

// declaredQueues is the set of the queues one copy of the manifest declares.
type declaredQueues struct {
	from  *fleet
	names map[string]struct{}
}

// bind lets the metrics label declared queues by name (queueLabels); New calls it.
func (m *metrics) bind(e *Engine) { m.queues.view = e.fleetView }

// QueueLabel returns the label the engine's series give queue: queue itself when a worker's
// manifest declares it, UndeclaredQueue otherwise. Collectors of per-queue series (the API's
// queue gauges) label with it, so that a scrape lists no more queues than the deployment has.
func (e *Engine) QueueLabel(queue string) string { return e.metrics.queues.label(queue) }

func (q *queueLabels) label(name string) string {
	if s := q.set.Load(); s != nil {
		if _, ok := s.names[name]; ok {
			return name
		}
	}
	return q.miss(name)
}

// miss labels a name the set lacks: it may have been declared since the set was built.
func (q *queueLabels) miss(name string) string {
	if q.view == nil {
		return UndeclaredQueue
	}
	// The store read this may make is fleetView's own (at most every fleetMaxAge); the timeout
	// bounds what it adds to a cancel or a record when the store is slow.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	f, err := q.view(ctx, false)
	cancel()
	if err != nil {
		return UndeclaredQueue
	}
	if _, ok := q.of(f).names[name]; ok {
		return name
	}
	return UndeclaredQueue
}

// of returns the set of the queues f declares, built once per copy of the manifest.
func (q *queueLabels) of(f *fleet) *declaredQueues {
	old := q.set.Load()
	if old != nil && old.from == f {
		return old
	}
	s := &declaredQueues{from: f, names: map[string]struct{}{}}
	for _, w := range f.workers {
		for _, name := range w.Queues {
			s.names[name] = struct{}{}
		}
	}
	for _, ds := range f.jobs {
		for _, d := range ds {
			s.names[d.cfg.Queue] = struct{}{}
		}
	}
	// A set built from an older copy by a concurrent miss may land instead: the next miss of a
	// name only the newer copy declares builds it again.
	q.set.CompareAndSwap(old, s)
	return s
}
