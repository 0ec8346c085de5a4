package engine

import (
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
	m.jobs.WithLabelValues(run.Queue, outcome).Inc()
	if run.State.Finished() {
		m.runSeconds.WithLabelValues(run.Queue, outcome).Observe(ms.Now.Sub(run.CreatedAt).Seconds())
	}
}

func (m *metrics) cancelled(run store.Run) {
	m.jobs.WithLabelValues(run.Queue, "cancelled").Inc()
	m.runSeconds.WithLabelValues(run.Queue, "cancelled").Observe(run.FinishedAt.Sub(run.CreatedAt).Seconds())
}

func (m *metrics) expired(ws []store.Woken) {
	for _, w := range ws {
		m.leasesLost.WithLabelValues(w.Queue).Inc()
	}
}

// reclaimed counts the claims a worker's release took back from running bodies (not its sticky
// reservations) as leases lost, and returns how many there were.
func (m *metrics) reclaimed(ws []store.Woken) (n int) {
	for _, w := range ws {
		if w.Reclaimed {
			m.leasesLost.WithLabelValues(w.Queue).Inc()
			n++
		}
	}
	return n
}
