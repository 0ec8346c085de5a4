package worker

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ultimat3/jobs"
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

func newMetrics(reg prometheus.Registerer) metrics {
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
	if reg != nil {
		reg.MustRegister(m.leasesLost, m.jobsTotal, m.resumed, m.replayed, m.handedBack)
	}
	return m
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
