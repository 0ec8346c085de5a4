package worker

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	leasesLost *prometheus.CounterVec
	jobsTotal  *prometheus.CounterVec
	resumed    prometheus.Counter
	replayed   prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) metrics {
	m := metrics{
		leasesLost: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "job_leases_lost_total",
			Help: "Leases with no renewal landed for a whole window: the run may now run twice."}, []string{"queue"}),
		jobsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "jobs_total",
			Help: "Claims ended by this worker, by outcome."}, []string{"queue", "outcome"}),
		resumed: prometheus.NewCounter(prometheus.CounterOpts{Name: "jobs_sticky_resumed_total",
			Help: "Wake-ups continued from a parked run without replay."}),
		replayed: prometheus.NewCounter(prometheus.CounterOpts{Name: "jobs_replayed_total",
			Help: "Claims that rebuilt the run by replaying its history."}),
	}
	if reg != nil {
		reg.MustRegister(m.leasesLost, m.jobsTotal, m.resumed, m.replayed)
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
