package worker

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/promreg"
)

var workerSource = prometheus.Labels{"source": "worker"}

type metrics struct {
	leasesLost *prometheus.CounterVec
	jobsTotal  *prometheus.CounterVec
	resumed    prometheus.Counter
	replayed   prometheus.Counter
	// handedBack counts claims handed back over this process's LimitConfig, by reason.
	handedBack *prometheus.CounterVec
}

// registerMetrics makes the worker's metrics and registers them with reg (none when nil). A
// second worker or host of the process on the same registry (two of them, or one started again
// after a Stop) finds its collectors already there and counts into those: the series are the
// process's, as the engine's are for every API server that serves them. Any other refusal (a
// series of the same name registered with another help or other labels) is an error, not a
// panic in worker.New, and leaves reg as it was.
func registerMetrics(reg prometheus.Registerer) (metrics, error) {
	m := metrics{
		// Named and described as the engine's, labelled source="worker": one process may serve
		// both from one registry.
		leasesLost: prometheus.NewCounterVec(prometheus.CounterOpts{Name: jobs.MetricLeasesLost, Help: jobs.MetricLeasesLostHelp,
			ConstLabels: workerSource}, []string{"queue"}),
		jobsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{Name: jobs.MetricJobsTotal, Help: jobs.MetricJobsTotalHelp,
			ConstLabels: workerSource}, []string{"queue", "outcome"}),
		resumed: prometheus.NewCounter(prometheus.CounterOpts{Name: "jobs_sticky_resumed_total",
			Help: "Wake-ups continued from a parked run without replay."}),
		replayed: prometheus.NewCounter(prometheus.CounterOpts{Name: "jobs_replayed_total",
			Help: "Claims that rebuilt the run by replaying its history."}),
		handedBack: prometheus.NewCounterVec(prometheus.CounterOpts{Name: jobs.MetricClaimsHandedBack,
			Help: jobs.MetricClaimsHandedBackHelp, ConstLabels: workerSource}, []string{"queue", "reason"}),
	}
	g := promreg.New(reg)
	promreg.Register(g, &m.leasesLost)
	promreg.Register(g, &m.jobsTotal)
	promreg.Register(g, &m.resumed)
	promreg.Register(g, &m.replayed)
	promreg.Register(g, &m.handedBack)
	if err := g.Err(); err != nil {
		return metrics{}, jobs.Wrap(jobs.CodeInvariant, err, "worker: register the metrics")
	}
	return m, nil
}

func (m metrics) done(queue, outcome string) { m.jobsTotal.WithLabelValues(queue, outcome).Inc() }

// LeasesLost returns the count of lost leases of a queue (for tests and health checks).
func (w *Worker) LeasesLost(queue string) float64 {
	var out float64
	c, err := w.metrics.leasesLost.GetMetricWithLabelValues(queue)
	if err == nil {
		out = readCounter(c)
	}
	return out
}
